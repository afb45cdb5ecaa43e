#!/usr/bin/env bash
# H200, session 12, third call: (1) rlx_q_stage_x's batched loads without a
# division per slot (call b's form divided each slot's flat index by the
# row pitch, twice, and its k = 640 Q5_0 GEMVs got slower: 5.56 -> 6.23 us
# a call in the trace); (2) sibling_ropes: the query and key rmsnorm_rope
# of a layer in one dispatch (the kernel's second weight). Suites on cuda
# at group sizes 0 and 32, memcheck and racecheck on the rope kernel, the
# decode step with everything, without glu_linear and without
# sibling_ropes (one run), the PDL-off trace.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "glu + rope + sibling ropes + quant (cuda, gs 0)" quant.log tests/ops/test_glu.py tests/ops/test_rope.py \
  tests/opt/test_sibling_ropes.py tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant gemv + glu + rope (gs 32)" quant32.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py \
  tests/ops/test_glu.py tests/ops/test_rope.py tests/opt/test_sibling_ropes.py --rlx-device cuda --rlx-group-size 32 \
  -k "gemv or glu or rope or dispatch or adjacent or cache"
sanitize memcheck "rope memcheck" memcheck.log tests/ops/test_rope.py tests/opt/test_sibling_ropes.py --rlx-device cuda \
  -k "second_weight or dispatch"
sanitize racecheck "rope racecheck" racecheck.log tests/ops/test_rope.py --rlx-device cuda -k "second_weight and f32"
KV_DTYPES=f32 WITHOUT=" ;glu_linear;sibling_ropes" timeout 150 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed: all, without glu_linear, without sibling_ropes rc=$?"
grep '^{' "$OUT/llm-speed.log" | cut -c1-200 | tee -a "$S"
pdl_off_trace 1 11
echo "=== summary ==="; cat "$S"
exit 0
