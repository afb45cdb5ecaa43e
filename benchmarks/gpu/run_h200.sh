#!/usr/bin/env bash
# Everything issue 6 measures on the H200, in one device call:
#   build in place (the image has Python, Cython, numpy, torch; no network),
#   kernel/pipeline suites on cuda at group sizes 1, 32 and 1024,
#   compute-sanitizer memcheck + racecheck on a representative subset,
#   BERT-shape benchmarks against PyTorch (JSON into $OUT).
set -uo pipefail
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
python3 setup.py build_ext --inplace -q >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
python3 -c "import rlx; from rlx.runtime import devices; print([ (d.name, d.available, d.reason) for d in devices.devices()])"
SUITES="tests/test_ops.py tests/test_ops_nn.py tests/test_attention_rope.py tests/test_optimizer.py tests/test_custom_kernels.py tests/test_random_graphs.py"
for gs in 1 32 1024; do
  echo "== kernel suites on cuda, group size $gs"
  python3 -m pytest -q -p no:cacheprovider $SUITES --rlx-device cuda --rlx-group-size $gs -x 2>&1 | tail -4 | tee -a "$OUT/suites.txt"
done
echo "== shim conformance + cuda shim tests"
python3 -m pytest -q -p no:cacheprovider tests/test_shim_conformance.py tests/test_cuda_shim.py -k cuda 2>&1 | tail -3 | tee -a "$OUT/suites.txt"
SUBSET="tests/test_ops_nn.py -k (softmax or rmsnorm or reductions or glu) and f32"
for tool in memcheck racecheck; do
  echo "== compute-sanitizer $tool (subset: $SUBSET, group size 256)"
  compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    python3 -m pytest -q -p no:cacheprovider tests/test_ops_nn.py -k "(softmax or rmsnorm or reductions) and f32" \
      --rlx-device cuda --rlx-group-size 256 -x 2>&1 | tail -4 | tee -a "$OUT/sanitizer.txt"
  compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    python3 -m pytest -q -p no:cacheprovider tests/test_attention_rope.py -k "f32" --rlx-device cuda \
      --rlx-group-size 128 -x 2>&1 | tail -4 | tee -a "$OUT/sanitizer.txt"
done
echo "== benchmarks"
python3 benchmarks/gpu/bert_cuda.py "$OUT/bert_cuda.json" 2>&1 | tail -12
