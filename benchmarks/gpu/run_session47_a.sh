#!/usr/bin/env bash
# Device, session 47, call a (issues 20 and 18), on a fresh machine:
# what cuBLASLt offers for FP8 with outer-vector scales (lt_outer_probe.py,
# torch only), then both kernel libraries built at once (the default and
# KERNEL_DEFINES=RLX_PARAMS_STAGE=1, the staged params of
# shaders/prelude/cuda.h; NVRTC builds one per process), the FP8 gemm suite
# on cuda (the outer form's cases among it, where the device reports
# gemm_fp8_outer), the FP8 products against torch._scaled_mm (the per-row
# rows take the outer form where it applies), then the decode step with and
# without the staging, alternating, with the staged library's suites
# between the pairs, while time is left (session 47: the staging was
# slower, benchmarks/README.md). Each
# step is skipped once the call is past its start deadline (seconds).
# Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session47_a.sh
WARM_CACHE=0 . benchmarks/gpu/common.sh
stand_in_model
before() { [ "$SECONDS" -lt "$1" ] || { note "skipped past ${1} s: $2"; return 1; }; }
timeout 90 python3 benchmarks/gpu/lt_outer_probe.py "$OUT/lt-outer.json" >"$OUT/lt-outer.log" 2>&1
note "lt_outer_probe rc=$?"; cut -c1-330 "$OUT/lt-outer.log" | tee -a "$S"
[ -n "${REAL:-}" ] && cp "$OUT/lt-outer.json" "$REAL/" 2>/dev/null
python3 -c "import rlx.runtime.shim as s; print('device info', s.open_device('cuda', 0).info)" 2>&1 | tail -1 | tee -a "$S"
warm_kernel_caches RLX_PARAMS_STAGE=1
before 430 "fp8 suite" && suite "fp8 gemm (cuda)" fp8.log tests/ops/test_fp8_gemm.py --rlx-device cuda
before 450 "fp8 bench" && FP8_SHAPES="square minilm_up gemma270m_m128_qkv" FP8_MINILM=0 fp8_gemm_step 60
decode_pair() {
  before 560 "decode stage-1" && decode_speed "stage-1$1" KERNEL_DEFINES=RLX_PARAMS_STAGE=1
  before 580 "decode stage-0" && decode_speed "stage-0$1"
}
decode_pair a
before 520 "staged suites" && ( export KERNEL_DEFINES=RLX_PARAMS_STAGE=1
  P="python3 benchmarks/gpu/pytest_defines.py -q -p no:cacheprovider"
  suite "staged: attention + norm gemv + rope + rope cache (cuda)" staged.log tests/ops/test_attention.py \
    tests/ops/test_norm_gemv.py tests/ops/test_rope.py tests/ops/test_rope_cache.py --rlx-device cuda )
decode_pair b
echo "=== summary"; cat "$S"
