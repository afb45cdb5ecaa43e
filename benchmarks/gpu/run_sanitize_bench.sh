#!/usr/bin/env bash
# Part 2 of the H200 run: compute-sanitizer memcheck and racecheck on a
# representative subset of the kernel suite, then the BERT-shape benchmarks
# against PyTorch (JSON into $OUT).
set -uo pipefail
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
python3 setup.py build_ext --inplace -q >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linear.py tests/runtime/test_executable.py -k "linear_paths or unsupported" \
  --rlx-device cuda --rlx-group-size 32 2>&1 | tail -1 | tee -a "$OUT/suites.txt"
# the f32 row-kernel tests (not the NaN ones, the many-groups softmax or the merged binary broadcasts)
ROW_K="(softmax or rmsnorm or fused_residual or reductions or glu or layernorm or binary_broadcast) and f32"
ROW_K="$ROW_K and not nan and not merged_and_split and not many_short_rows"
for tool in memcheck racecheck; do
  echo "== compute-sanitizer $tool" | tee -a "$OUT/sanitizer.txt"
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    python3 -m pytest -q -p no:cacheprovider tests/ops/test_softmax.py tests/ops/test_norm.py tests/ops/test_reduce.py \
      tests/ops/test_glu.py tests/ops/test_elementwise.py \
      -k "$ROW_K" \
      --rlx-device cuda --rlx-group-size 256 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" | tail -3 \
      | tee -a "$OUT/sanitizer.txt"
  echo "rc=${PIPESTATUS[0]}" | tee -a "$OUT/sanitizer.txt"
  timeout 120 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    python3 -m pytest -q -p no:cacheprovider tests/ops/test_attention.py tests/ops/test_rope.py -k "f32 and not property and not nan" \
      --rlx-device cuda \
      --rlx-group-size 128 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" | tail -3 | tee -a "$OUT/sanitizer.txt"
  echo "rc=${PIPESTATUS[0]}" | tee -a "$OUT/sanitizer.txt"
done
echo "== benchmarks"
PYTHONPATH=$PWD timeout 200 python3 benchmarks/gpu/bert_cuda.py "$OUT/bert_cuda.json" 2>&1 | tail -14
echo "== cost model accuracy on cuda"
PYTHONPATH=$PWD timeout 150 python3 -m pytest -q -p no:cacheprovider benchmarks/test_cost_accuracy.py -s -k cuda 2>&1 | tail -25
cp benchmarks/results/cost_accuracy-cuda.json "$OUT/" 2>/dev/null
