#!/usr/bin/env bash
# Device, session 49 (issues 18 and 17), on a fresh machine: the library at
# its new default, params by value (RLX_PARAMS_BY_VALUE=1, flipped after
# session 49's run of run_session48_a.sh / _b.sh timed it). The small-graph
# check, the shim conformance suite (the ICB and schedule tests now follow
# each pipeline's value_bindings), the GGUF on-device tests (decode with
# patched params, encoded directly), memcheck on the ICB and schedule
# tests, every kernel suite file on cuda one by one until the deadline, and
# one decode-speed line. Each step is skipped once the call is past its
# start deadline, counted back from CALL_S (the call's limit, 600 s). Carry .gpu_carry and
# .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w CALL_S=600 bash benchmarks/gpu/run_session49.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
stand_in_model
trap 'cp "$OUT"/*.json "${REAL:-$OUT}"/ 2>/dev/null' EXIT
before() { [ "$SECONDS" -lt "$1" ] || { note "skipped past ${1} s: $2"; return 1; }; }
END=${CALL_S:-600}   # the call's limit in seconds: the steps' deadlines count back from it
timeout 60 python3 benchmarks/gpu/params_smoke.py cuda 2>&1 | tail -1 | tee -a "$S"
suite "shim conformance (cuda)" cts.log tests/cts -k cuda
before $((END - 110)) "gguf on device" && suite "gguf on device + bound io + abi layout (cuda)" models.log \
  tests/models/test_gguf_on_device.py tests/runtime/test_bound_io.py tests/runtime/test_abi_layout.py --rlx-device cuda
before $((END - 80)) "memcheck" && SAN_TIMEOUT=60 sanitize memcheck "memcheck icb + schedule (cuda)" memcheck.log \
  tests/cts/test_icb.py tests/cts/test_schedule.py -k cuda
for f in tests/ops/test_*.py tests/test_signal.py; do
  before $((END - 170)) "$f" || break
  suite "$(basename "$f" .py) (cuda)" "$(basename "$f" .py).log" "$f" --rlx-device cuda
done
before $((END - 70)) "decode" && decode_speed default
echo "=== summary"; cat "$S"
