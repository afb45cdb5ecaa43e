#!/usr/bin/env bash
# H200, session 24, first call: the residual norms folded into the decode
# GEMVs after them (gemv1n, rlx/lowering/quant.py norm_gemv): its suite and
# the norm and glu suites on cuda (group sizes 0 and 32), memcheck and
# racecheck on its cases, the tiny Gemma's teacher-forced logits with and
# without the fold and against the CPU (norm_gemv_check.py), the quant
# suites (the GEMV params grew), the decode step on the stand-in with and
# without the fold in one run, and its PDL-off trace. Carry .gpu_carry and
# .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "norm gemv + norm + glu (cuda, gs 0)" ng.log tests/ops/test_norm_gemv.py tests/ops/test_norm.py \
  tests/ops/test_glu.py --rlx-device cuda
suite "norm gemv (cuda, gs 32)" ng32.log tests/ops/test_norm_gemv.py --rlx-device cuda --rlx-group-size 32
sanitize memcheck "memcheck norm gemv" ngmem.log tests/ops/test_norm_gemv.py --rlx-device cuda -k "test_gemv_forms"
sanitize racecheck "racecheck norm gemv" ngrace.log tests/ops/test_norm_gemv.py --rlx-device cuda \
  -k "test_gemv_forms and (q5_0 or q4_k)"
timeout 120 python3 benchmarks/gpu/norm_gemv_check.py "$OUT/norm-gemv-check.json" >"$OUT/norm-gemv-check.log" 2>&1
note "norm gemv check rc=$? $(tail -1 "$OUT/norm-gemv-check.log" | cut -c1-600)"
suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py \
  --rlx-device cuda
WITHOUT=" ;norm_gemv" KV_DTYPES=f32 timeout 240 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "llm decode speed (with, without the fold) rc=$?"; grep '^{' "$OUT/llm-speed.log" | cut -c1-400 | tee -a "$S"
pdl_off_trace 1 12
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/trace.json
echo "=== summary"; cat "$S"
