#!/usr/bin/env bash
# H200: build, launch-struct layout check, CUDA conformance + kernel suites
# (group size 256), then the BERT benchmark (JSON to $OUT), the profile
# (JSON lines to $OUT) and the replay floor split into the shim's steps.
# QUICK=1 skips the group-size sweep and compute-sanitizer. PART=check stops
# before the benchmark, PART=bench starts there (two device calls of < 10 min).
set -uo pipefail
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD
python3 setup.py build_ext --inplace -q >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
PART=${PART:-all}
QUICK=${QUICK:-0}
if [ "$PART" != bench ]; then
gcc -I/usr/local/cuda/include -Icsrc benchmarks/gpu/launch_layout_check.c -o /tmp/llc && /tmp/llc
echo "== conformance"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/cts tests/runtime/test_cuda_shim.py tests/runtime/test_core_program.py -k "cuda or dependent_chain" 2>&1 | tail -4
echo "== suites on cuda"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops tests/ir/test_ir.py::test_ir_errors_name_the_problem tests/lowering/test_row_grid.py \
  tests/runtime/test_executable.py tests/opt/test_optimizer.py tests/models/test_bert.py tests/opt/test_random_graphs.py \
  tests/runtime/test_custom_kernels.py tests/opt/test_sibling_fusion.py --rlx-device cuda 2>&1 | grep -E "passed|failed|FAILED|Error" | tail -8
# the transformer op set's tests (once tests/test_ops_nn.py): row kernels, reductions, linear paths, glu, concat
NN_K="(test_unary or test_binary or reductions or argmax_ties or masked_softmax or rmsnorm or fused_residual"
NN_K="$NN_K or linear_paths or glu_reads_halves or concat or property_softmax) and not (gelu_silu or nan or infinities"
NN_K="$NN_K or same_shape or binary_broadcast or strided_views or many_short_rows) or ir_errors_name"
for gs in $([ "$QUICK" = 1 ] || echo 1 8 1024); do
  echo "== row kernels at group size $gs"
  timeout 60 python3 -m pytest -q -p no:cacheprovider tests/ops/test_elementwise.py tests/ops/test_reduce.py \
    tests/ops/test_norm.py tests/ops/test_softmax.py tests/ops/test_linear.py tests/ops/test_glu.py tests/ops/test_movement.py \
    -k "$NN_K" tests/ir/test_ir.py::test_ir_errors_name_the_problem --rlx-device cuda --rlx-group-size $gs 2>&1 | tail -1
done
echo "== compute-sanitizer (f32 row kernels and attention, PDL on)"
for tool in $([ "$QUICK" = 1 ] || echo memcheck racecheck); do
  timeout 100 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    python3 -m pytest -q -p no:cacheprovider tests/ops/test_softmax.py tests/ops/test_norm.py tests/ops/test_glu.py \
      tests/ops/test_attention.py tests/ops/test_rope.py \
      -k "(softmax or layernorm or glu or attention or rope) and f32 and not property and not nan" \
      --deselect "tests/ops/test_softmax.py::test_softmax[" --deselect "tests/ops/test_norm.py::test_layernorm[" \
      --rlx-device cuda 2>&1 \
    | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" | tail -2
  echo "$tool rc=${PIPESTATUS[0]}"
done
echo "== queues (RLX_CUDA_QUEUES=1): conformance, executables on threads, overlap"
RLX_CUDA_QUEUES=1 timeout 120 python3 -m pytest -q -p no:cacheprovider tests/cts \
  tests/runtime/test_executable.py tests/runtime/test_core_program.py -k "cuda or queue or thread" --rlx-device cuda 2>&1 | tail -2
[ "$QUICK" = 1 ] || RLX_CUDA_QUEUES=1 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops \
  tests/ir/test_ir.py::test_ir_errors_name_the_problem tests/models/test_bert.py tests/opt/test_random_graphs.py tests/opt/test_sibling_fusion.py \
  --rlx-device cuda 2>&1 | tail -1
timeout 200 python3 benchmarks/gpu/queues_overlap.py cuda 2>&1 | tail -2 | cut -c1-600
fi
[ "$PART" = check ] && exit 0
echo "== bench"
timeout 220 python3 benchmarks/gpu/bert_cuda.py "$OUT/bert.json" 2>&1 | tail -9 | cut -c1-1200
echo "== replay floor without PDL"
RLX_CUDA_PDL=0 timeout 40 python3 -c "import sys; sys.path.insert(0, 'benchmarks/gpu'); from bert_cuda import replay_floor; print(replay_floor())"
echo "== kernels inside the replayed graphs (CUPTI through torch.profiler)"
timeout 120 python3 benchmarks/gpu/kernel_trace.py 2>&1 | tee "$OUT/kernel_trace.jsonl" | cut -c1-3000
echo "== profile"
timeout 100 python3 benchmarks/gpu/profile_cuda.py 2>&1 | tee "$OUT/profile.jsonl" | cut -c1-700
echo "== replay floor: kernel bodies, and a bare CUDA-runtime program (pdl_probe.cu)"
timeout 60 python3 benchmarks/gpu/floor_kernels.py 2>&1 | tail -2
nvcc -O2 -arch=sm_90 benchmarks/gpu/pdl_probe.cu -o /tmp/pdl_probe && timeout 60 /tmp/pdl_probe | tail -6
echo "== replay floor by shim step"
bash benchmarks/gpu/floor_phases.sh 2>&1 | tail -12
