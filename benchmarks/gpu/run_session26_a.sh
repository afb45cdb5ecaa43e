#!/usr/bin/env bash
# H200, session 26, call a: the checks of the GPU-side changes made since
# the last device call (session 24), none of them run on a GPU before:
# - session 26: the splat projection's determinant by Cauchy-Binet and the
#   conic kept factored (shaders/splat.h): the splat suite and the fuzzer's
#   new splat frames on cuda;
# - session 26: the split-K attention merge reads each split's (m, l) once
#   into group memory (shaders/attention.h): the attention suite at group
#   sizes 0 and 32, racecheck on the split forms;
# - session 25: the residual norm chain written once (shaders/norm_chain.h,
#   rmsnorm_add and gemv1n's x staging): the norm and norm-GEMV suites at
#   group sizes 0 and 32, memcheck and racecheck, the tiny Gemma's logits
#   with and without the fold;
# - session 25: the fuzzer's fixed set on cuda at group size 32.
# Call b (run_session26_b.sh) measures the decode step. Carry .gpu_carry and
# .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "splat (cuda, gs 0)" splat.log tests/ops/test_splat.py --rlx-device cuda
timeout 120 $P tests/fuzz/test_fuzz.py -k test_splat_frame --rlx-device cuda --fuzz-runs 300 --fuzz-seed 500 >"$OUT/fuzz-splat.log" 2>&1
note "fuzz splat frames (cuda, 300 from seed 500) rc=$? $(tail -1 "$OUT/fuzz-splat.log")"
grep -E "^FAILED" "$OUT/fuzz-splat.log" | head -4 | cut -c1-250
attention_checks "attention split-merge" "(test_attention_split_decode_gqa and 513 and False) or test_attention_split_masks_window_softcap" racecheck
NORM_TESTS="tests/ops/test_norm.py tests/ops/test_norm_gemv.py tests/opt/test_norm_fusion.py"
suite "norm + norm gemv (cuda, gs 0)" norm.log $NORM_TESTS --rlx-device cuda
suite "norm + norm gemv (cuda, gs 32)" norm32.log $NORM_TESTS --rlx-device cuda --rlx-group-size 32
sanitize memcheck "memcheck norm gemv" memcheck.log tests/ops/test_norm_gemv.py --rlx-device cuda
sanitize racecheck "racecheck norm gemv" racecheck-gemv.log tests/ops/test_norm_gemv.py --rlx-device cuda
sanitize racecheck "racecheck rmsnorm_add" racecheck-norm.log tests/ops/test_norm.py --rlx-device cuda -k rmsnorm_add
timeout 120 python3 benchmarks/gpu/norm_gemv_check.py "$OUT/norm-gemv-check.json" >"$OUT/norm-gemv-check.log" 2>&1
note "norm gemv check rc=$? $(tail -1 "$OUT/norm-gemv-check.log" | cut -c180-700)"
timeout 150 $P tests/fuzz/test_fuzz.py --rlx-device cuda --rlx-group-size 32 >"$OUT/fuzz32.log" 2>&1
note "fuzz fixed set (cuda, gs 32) rc=$? $(tail -1 "$OUT/fuzz32.log")"
grep -E "^FAILED" "$OUT/fuzz32.log" | head -8 | cut -c1-250
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
