#!/usr/bin/env bash
# H200, session 13, third call: the final code (attention_split_merge at
# 256 threads, call b's best): the attention suite on cuda at the lowering's
# group sizes and at 64, memcheck and racecheck on the one-dispatch cases,
# the ops/opt suites and the PDL contract, the PDL-off trace.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
suite "attention split forms (cuda, gs 64)" att64.log tests/ops/test_attention.py --rlx-device cuda \
  --rlx-group-size 64 -k "split or form"
sanitize memcheck "split_merge memcheck" memcheck.log tests/ops/test_attention.py --rlx-device cuda \
  -k "one_dispatch and masks"
sanitize racecheck "split_merge racecheck" racecheck.log tests/ops/test_attention.py --rlx-device cuda \
  -k "one_dispatch and masks"
timeout 200 $P tests/ops tests/opt tests/runtime/test_pdl_contract.py tests/runtime/test_bound_io.py tests/cts \
  --rlx-device cuda -x >"$OUT/ops.log" 2>&1
note "ops + opt + pdl + bound io + cts (cuda) rc=$? $(tail -1 "$OUT/ops.log")"; grep -E "^FAILED" "$OUT/ops.log" | head -5
pdl_off_trace 1 12
echo "=== summary ==="; cat "$S"
exit 0
