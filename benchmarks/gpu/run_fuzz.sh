#!/usr/bin/env bash
# H200 run for issue 14: build, then on cuda the NaN-semantics suite and
# the differential fuzzer (tests/fuzz/test_fuzz.py, a fixed-seed run of
# FUZZ_RUNS seeds) at two group sizes, the kernel suites at the default
# group size (the NaN-propagating group reductions changed), and
# compute-sanitizer racecheck on the reductions. Summaries go to $OUT.
# The NaN-semantics suite is the NaN and accuracy tests of the op families
# in tests/ops/ (NAN_K selects them; they were tests/test_nan_semantics.py).
# Two device calls of < 10 min: GROUP_SIZES=32 PART=suites, then
# GROUP_SIZES=256 PART=racecheck (PART=fuzz: the NaN suite and fuzzer only).
set -uo pipefail
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD PYTHONUNBUFFERED=1 RLX_CALIBRATE=0
python3 setup.py build_ext --inplace -q >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$OUT/machine.txt"
FUZZ_RUNS=${FUZZ_RUNS:-300}
NAN_K="(nan or infinities or maximum_scalar or fuzzed_row or relative_error or exp_overflows) and not rows_never_nan"
for gs in ${GROUP_SIZES:-32 256}; do
  echo "== NaN semantics on cuda, group size $gs" | tee -a "$OUT/summary.txt"
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/ops -k "$NAN_K" --rlx-device cuda \
    --rlx-group-size "$gs" 2>&1 | grep -E "passed|failed|FAILED" | tail -12 | tee -a "$OUT/summary.txt"
  echo "== fuzzer on cuda, group size $gs: fixed set, then $FUZZ_RUNS seeds from 1000" | tee -a "$OUT/summary.txt"
  timeout 130 python3 -m pytest -q -p no:cacheprovider tests/fuzz/test_fuzz.py --rlx-device cuda --rlx-group-size "$gs" \
    2>&1 | tee "$OUT/fuzz_fixed_gs$gs.log" | grep -E "passed|failed|FAILED" | tail -12 | tee -a "$OUT/summary.txt"
  timeout 160 python3 -m pytest -q -p no:cacheprovider tests/fuzz/test_fuzz.py --rlx-device cuda --rlx-group-size "$gs" \
    --fuzz-runs "$FUZZ_RUNS" --fuzz-seed 1000 2>&1 | tee "$OUT/fuzz_long_gs$gs.log" \
    | grep -E "passed|failed|FAILED" | tail -12 | tee -a "$OUT/summary.txt"
done
PART=${PART:-suites}
[ "$PART" = fuzz ] && exit 0
if [ "$PART" = suites ]; then
echo "== kernel suites on cuda (default group size)" | tee -a "$OUT/summary.txt"
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/ops tests/ir/test_ir.py::test_ir_errors_name_the_problem \
  tests/opt/test_optimizer.py tests/opt/test_random_graphs.py tests/models/test_bert.py --rlx-device cuda \
  2>&1 | grep -E "passed|failed|FAILED" | tail -12 | tee -a "$OUT/summary.txt"
exit 0
fi
echo "== compute-sanitizer racecheck: reductions, softmax, attention with NaN" | tee -a "$OUT/summary.txt"
timeout 100 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 \
  python3 -m pytest -q -p no:cacheprovider tests/ops -k "($NAN_K) and (max or softmax or attention)" \
  --rlx-device cuda --rlx-group-size 256 2>&1 | grep -E "RACECHECK SUMMARY|passed|failed" | tail -3 \
  | tee -a "$OUT/summary.txt"
echo "racecheck rc=${PIPESTATUS[0]}" | tee -a "$OUT/summary.txt"
