#!/usr/bin/env bash
# H200, session 12, first call: glu_linear, the gated FFN's down projection
# whose gemv1 forms glu(gate, up) as it stages x (the glu kernel no longer
# runs in a decode step). Its suites on cuda at group sizes 0 and 32, the
# quantized GEMV suites (QuantGemvParams grew by the glu fields), memcheck
# and racecheck on the fused GEMV, then the decode step with and without
# the fusion in one run (WITHOUT=" ;glu_linear"), and the PDL-off trace.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "glu + glu_linear (cuda, gs 0)" glu0.log tests/ops/test_glu.py --rlx-device cuda
suite "glu + glu_linear (cuda, gs 32)" glu32.log tests/ops/test_glu.py --rlx-device cuda --rlx-group-size 32
suite "quant kernels+e2e (gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant gemv (gs 64)" quant64.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda \
  --rlx-group-size 64 -k gemv
sanitize memcheck "glu_linear memcheck" memcheck.log tests/ops/test_glu.py --rlx-device cuda -k glu_linear
sanitize racecheck "glu_linear racecheck" racecheck.log tests/ops/test_glu.py --rlx-device cuda -k "packed_gate and q8_0 and silu"
KV_DTYPES=f32 WITHOUT=" ;glu_linear" timeout 120 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed, with and without glu_linear rc=$?"; grep '^{' "$OUT/llm-speed.log" | cut -c1-260 | tee -a "$S"
pdl_off_trace 1 14
echo "=== summary ==="; cat "$S"
exit 0
