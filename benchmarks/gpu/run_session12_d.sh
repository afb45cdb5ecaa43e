#!/usr/bin/env bash
# H200, session 12, last call: the final code's op, optimizer, state and
# model-graph suites on cuda (the rmsnorm_rope and QuantGemvParams layout
# changes touch every decoder path), the PDL contract, and the GEMV cases
# at group size 64. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
suite_long() {   # suite with a longer limit: LABEL LOG PYTEST_ARGS...
  local label=$1 log=$2; shift 2
  timeout 240 $P "$@" >"$OUT/$log" 2>&1
  note "$label rc=$? $(tail -1 "$OUT/$log")"; grep -E "^FAILED" "$OUT/$log" | head -8 | cut -c1-250
}
suite_long "tests/ops + tests/opt (cuda, gs 0)" ops.log tests/ops tests/opt tests/runtime/test_pdl_contract.py \
  --rlx-device cuda -q
suite "glu + rope + sibling ropes + gemv (cuda, gs 64)" gs64.log tests/ops/test_glu.py tests/ops/test_rope.py \
  tests/opt/test_sibling_ropes.py tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 64 \
  -k "gemv or glu or rope or dispatch or adjacent or cache"
echo "=== summary ==="; cat "$S"
exit 0
