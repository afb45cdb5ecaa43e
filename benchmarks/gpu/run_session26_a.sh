#!/usr/bin/env bash
# H200, session 26's first call: session 25's first call (never run: no device was
# lent in session 25) with
# the splat suite on cuda first (session 26 factored the conic and formed
# the 2D covariance's determinant by Cauchy-Binet, shaders/splat.h) and
# the fuzzer's new splat frames on cuda.
# Session 25's notes: first the checks of session 25's one GPU-side
# change, the residual norm chain written once (shaders/norm_chain.h, used
# by rmsnorm_add and gemv1n's x staging): the norm and norm-GEMV suites on
# cuda at group sizes 0 and 32, memcheck and racecheck on them, and the tiny
# Gemma's logits with and without the fold. Then session 24's unfinished
# call c: the decode step with PDL on, off and `auto` (never run on a GPU),
# the PDL-contract and schedule suites, and last the late PDL trigger
# (a kernel library of its own to compile; summary.txt comes back even if
# it is cut off), after the fuzzer's new cases on cuda. Carry .gpu_carry
# and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "splat (cuda, gs 0)" splat.log tests/ops/test_splat.py tests/test_splat_io.py --rlx-device cuda
timeout 120 $P tests/fuzz/test_fuzz.py -k test_splat_frame --rlx-device cuda --fuzz-runs 300 --fuzz-seed 500 >"$OUT/fuzz-splat.log" 2>&1
note "fuzz splat frames (cuda, 300 from seed 500) rc=$? $(tail -1 "$OUT/fuzz-splat.log")"
grep -E "^FAILED" "$OUT/fuzz-splat.log" | head -4 | cut -c1-250
NORM_TESTS="tests/ops/test_norm.py tests/ops/test_norm_gemv.py tests/opt/test_norm_fusion.py"
suite "norm + norm gemv (cuda, gs 0)" norm.log $NORM_TESTS --rlx-device cuda
suite "norm + norm gemv (cuda, gs 32)" norm32.log $NORM_TESTS --rlx-device cuda --rlx-group-size 32
sanitize memcheck "memcheck norm gemv" memcheck.log tests/ops/test_norm_gemv.py --rlx-device cuda
sanitize racecheck "racecheck norm gemv" racecheck.log tests/ops/test_norm_gemv.py --rlx-device cuda
sanitize racecheck "racecheck rmsnorm_add" racecheck-norm.log tests/ops/test_norm.py --rlx-device cuda -k rmsnorm_add
timeout 120 python3 benchmarks/gpu/norm_gemv_check.py "$OUT/norm-gemv-check.json" >"$OUT/norm-gemv-check.log" 2>&1
note "norm gemv check rc=$? $(tail -1 "$OUT/norm-gemv-check.log" | cut -c180-700)"
decode_speed early RLX_CUDA_PDL=1
decode_speed pdl-off RLX_CUDA_PDL=0
decode_speed auto RLX_CUDA_PDL=auto   # each executable times both launch forms over its first runs (launch_mode)
suite "pdl contract + schedules (cuda, gs 0)" pdl.log tests/runtime/test_pdl_contract.py tests/cts/test_schedule.py \
  tests/runtime/test_launch_explore.py --rlx-device cuda
# The fuzzer's session-25 cases on cuda (quantized weights and the model
# graphs: the norm-GEMV and GLU-GEMV folds are GPU-only, so only here do
# the random graphs reach them), its fixed set at group size 32.
timeout 150 $P tests/fuzz/test_fuzz.py --rlx-device cuda --rlx-group-size 32 >"$OUT/fuzz32.log" 2>&1
note "fuzz fixed set (cuda, gs 32) rc=$? $(tail -1 "$OUT/fuzz32.log")"
grep -E "^FAILED" "$OUT/fuzz32.log" | head -8 | cut -c1-250
timeout 150 $P tests/fuzz/test_fuzz.py --rlx-device cuda -k "test_random_model_graph or quant or fft or fp8 or scaled or sort or attention" \
  --fuzz-runs 600 --fuzz-seed 1000 >"$OUT/fuzz-model.log" 2>&1
note "fuzz model graphs + quant + fft + fp8 + sort + attention (cuda) rc=$? $(tail -1 "$OUT/fuzz-model.log")"
grep -E "^FAILED" "$OUT/fuzz-model.log" | head -8 | cut -c1-250
decode_speed late RLX_CUDA_PDL=1 KERNEL_DEFINES=RLX_PDL_LATE_TRIGGER=1
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
