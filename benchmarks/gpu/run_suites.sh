#!/usr/bin/env bash
# Part 1 of the H200 run: build, then the kernel and pipeline suites on cuda
# at group sizes 1, 32 and 1024, and the shim conformance suite.
set -uo pipefail
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
python3 setup.py build_ext --inplace -q >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
python3 -c "from rlx.runtime import devices; print([(d.name, d.available, d.reason) for d in devices.devices()])"
SUITES="tests/runtime/test_core_program.py tests/ops tests/ir/test_ir.py::test_ir_errors_name_the_problem tests/opt/test_optimizer.py tests/runtime/test_custom_kernels.py
  tests/opt/test_random_graphs.py tests/runtime/test_executable.py tests/models/test_bert.py"
for gs in 1 32 1024; do
  echo "== kernel suites on cuda, group size $gs"
  timeout 170 python3 -m pytest -q -p no:cacheprovider $SUITES --rlx-device cuda --rlx-group-size $gs 2>&1 \
    | grep -E "passed|failed|FAILED|Error" | tail -8 | tee -a "$OUT/suites.txt"
done
echo "== shim conformance + cuda shim tests"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/cts tests/runtime/test_cuda_shim.py -k cuda 2>&1 \
  | tail -3 | tee -a "$OUT/suites.txt"
