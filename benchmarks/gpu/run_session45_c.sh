#!/usr/bin/env bash
# Device, session 45, call e (issue 20): the FP8 x FP8 products against
# torch._scaled_mm measured like for like. fp8_gemm_cuda.py had summed each
# rlx thunk's own event-timed launch against torch's event-timed graph
# replay; at the decode shapes both are mostly a launch's round trip. Now
# also the whole product replayed with no copies (events, as torch's
# replay) and both sides' kernels as CUPTI records them. First the FP8 and
# FP8 gemm suites on cuda (the code they test is unchanged since they last
# passed; this checks the machine). Every line goes into the summary.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session45_c.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
suite "fp8 (cuda, gs 0)" fp8.log tests/ops/test_fp8.py --rlx-device cuda
timeout 180 $P tests/ops/test_fp8_gemm.py --rlx-device cuda >"$OUT/fp8-gemm.log" 2>&1
note "fp8 gemm (cuda) rc=$? $(tail -1 "$OUT/fp8-gemm.log")"; grep -E "^FAILED" "$OUT/fp8-gemm.log" | head -8 | cut -c1-250
fp8_gemm_step 300
echo "=== summary"; cat "$S"
