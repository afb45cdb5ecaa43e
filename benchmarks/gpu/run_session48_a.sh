#!/usr/bin/env bash
# Device, session 48, call a (issue 18, then 17), on a fresh machine: params
# by value (the CUDA prelude's rlx_params_value, KERNEL_DEFINES=
# RLX_PARAMS_BY_VALUE=1) against params through a pointer into the params
# region (the default until this call times it). Both kernel libraries are built
# at once (NVRTC builds one per process); then the shim conformance suite
# and the suites the decode step's kernels run in, by value; the decode
# step alternating the two forms; the PDL-off trace by value; the 4096 x
# 4096 GEMVs in both forms. Each step is skipped once the call is past its
# start deadline (seconds), for a call of 600 s. Carry .gpu_carry and
# .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session48_a.sh
WARM_CACHE=0 . benchmarks/gpu/common.sh
stand_in_model
trap 'cp "$OUT"/*.json "${REAL:-$OUT}"/ 2>/dev/null' EXIT
before() { [ "$SECONDS" -lt "$1" ] || { note "skipped past ${1} s: $2"; return 1; }; }
warm_kernel_caches RLX_PARAMS_BY_VALUE=1
BV=KERNEL_DEFINES=RLX_PARAMS_BY_VALUE=1
env $BV timeout 60 python3 benchmarks/gpu/params_smoke.py cuda 2>&1 | tail -3 | tee -a "$S"
decode_pair() {
  before "${D1:-470}" "decode bv-1$1" && decode_speed "bv-1$1" $BV
  before "${D0:-500}" "decode bv-0$1" && decode_speed "bv-0$1"
}
decode_pair a
# The suites by value (pytest_defines.py: pytest under KERNEL_DEFINES).
( export $BV; P="python3 benchmarks/gpu/pytest_defines.py -q -p no:cacheprovider"
  before 400 "cts" && suite "shim conformance (cuda, by value)" cts.log tests/cts -k cuda
  before 420 "attention" && suite "attention (cuda, by value)" att.log tests/ops/test_attention.py --rlx-device cuda
  before 440 "norm gemv + rope" && suite "norm gemv + rope + rope cache (cuda, by value)" ngr.log \
    tests/ops/test_norm_gemv.py tests/ops/test_rope.py tests/ops/test_rope_cache.py --rlx-device cuda
  before 450 "quant gemv" && suite "quant gemv kernels (cuda, by value)" quant.log \
    tests/ops/test_quant_kernels.py --rlx-device cuda -k gemv )
D1=510 D0=530 decode_pair b
before 500 "trace" && ( export $BV; pdl_off_trace 1 12 )
before 520 "gemv bv-1" && gemv_kernel_bench bv-1 ONLY_ROWS=4096 $BV
before 535 "gemv bv-0" && gemv_kernel_bench bv-0 ONLY_ROWS=4096
echo "=== summary"; cat "$S"
