#!/usr/bin/env bash
# Device, session 46, call d (issue 20), for the session's last ~400 s of
# device time: the FP8 gemm's direct form (per-tensor scales as cuBLASLt's
# scale pointers, no epilogue) on cuda, whose graphs have no kernel, so no
# NVRTC build of the library is paid (WARM_CACHE=0): its suite cases
# against the float64 product, then its products against
# torch._scaled_mm's tensorwise call. Carry .gpu_carry.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session46_d.sh
WARM_CACHE=0 . benchmarks/gpu/common.sh
export RLX_CALIBRATE=0   # no calibration probes: they would build the kernel library
suite "fp8 direct form (cuda)" fp8d.log tests/ops/test_fp8_gemm.py --rlx-device cuda \
  -k "large_direct or (direct_form_on and not 33-50)"
FP8_TENSORWISE_ONLY=1 FP8_SHAPES="square minilm_up gemma270m_m128_qkv gemma270m_m128_down" FP8_MINILM=0 \
  fp8_gemm_step 90
echo "=== summary"; cat "$S"
