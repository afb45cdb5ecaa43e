#!/usr/bin/env bash
# H200, session 23, fourth call: call c's memcheck selection again after
# the CUDA shim rounds allocations up to whole 16-byte units (call c: one
# report, a 16-byte cp.async read at a q5_0 weight's last 8 bytes, in
# gemv1i's pass copy). Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
sanitize memcheck "memcheck gemv" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "(gemv_matches or long_rows or gemv1i) and (q4_k or q5_0 or q6_k or q8_0) and 256"
grep -m3 -A3 "Invalid" "$OUT/memcheck.log" | head -8
tail -3 "$OUT/memcheck.log"
echo "=== summary"; cat "$S"
