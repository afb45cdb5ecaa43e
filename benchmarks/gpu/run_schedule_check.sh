#!/usr/bin/env bash
# H200, one device call (< 10 min when the kernel cache is warm: the conformance and CUDA shim step
# alone takes ~6 min from a cold cache, three NVRTC compiles of the built-in library): schedules (rlx_shim.h schedule_create /
# cmd_execute_schedule / schedule_free; issue 15 item 4). Checks, in order:
#  1. the build (python3 setup.py build_ext --inplace);
#  2. the conformance suite and the CUDA shim / core tests on cuda (-k cuda),
#     tests/cts/test_schedule.py among them: dispatch + gemm + ICB mixes,
#     patched params read per execution, bad descriptors refused, 50
#     executions, two schedules on two threads;
#  3. the kernel / pipeline suites with --rlx-device cuda (every replayed
#     executable now runs one schedule = one CUDA graph captured at creation);
#  4. the same conformance + executable tests with RLX_CUDA_QUEUES=1 (a
#     schedule launched on a queue's stream, its own cuBLASLt workspace);
#  5. compute-sanitizer memcheck and racecheck on the schedule tests and a
#     short kernel subset;
#  6. benchmarks/gpu/bert_cuda.py $OUT/bert.json: "no worse" means, against
#     benchmarks/results/h200-bert-cuda-2026-11-29-run22.json, every row's
#     ratio_replay_vs_torch_graph not above run 22's by more than noise
#     (~0.05; run 22: f32 1x16 0.64, 1x128 0.76, 32x128 0.86) and the replay
#     floor's rlx_replay_sync_us near 43-54 us (ratio_replay_sync <= ~0.75).
# A compact summary is printed at the end.
source "$(dirname "$0")/common.sh"
echo "== conformance + CUDA shim (cuda)"
timeout 420 $P tests/cts tests/runtime/test_cuda_shim.py tests/runtime/test_core_program.py -k "cuda or dependent_chain" \
  >"$OUT/cts.log" 2>&1; note "cts+shim rc=$? $(tail -1 "$OUT/cts.log")"
grep -E "^FAILED|Error" "$OUT/cts.log" | head -8
echo "== suites on cuda"
timeout 100 $P tests/ops tests/ir/test_ir.py::test_ir_errors_name_the_problem tests/lowering/test_row_grid.py \
  tests/runtime/test_executable.py tests/opt/test_optimizer.py tests/models/test_bert.py tests/opt/test_random_graphs.py \
  tests/runtime/test_custom_kernels.py tests/opt/test_sibling_fusion.py --rlx-device cuda >"$OUT/suites.log" 2>&1
note "suites rc=$? $(tail -1 "$OUT/suites.log")"
grep -E "^FAILED" "$OUT/suites.log" | head -8
echo "== queues (RLX_CUDA_QUEUES=1)"
RLX_CUDA_QUEUES=1 timeout 40 $P tests/cts tests/runtime/test_executable.py tests/runtime/test_core_program.py \
  -k "cuda or queue or thread" --rlx-device cuda >"$OUT/queues.log" 2>&1
note "queues rc=$? $(tail -1 "$OUT/queues.log")"
grep -E "^FAILED" "$OUT/queues.log" | head -5
echo "== compute-sanitizer"
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    $P tests/cts/test_schedule.py tests/ops/test_softmax.py tests/ops/test_norm.py tests/models/test_bert.py \
      -k "cuda or ((softmax or layernorm or bert) and f32 and not property and not nan)" \
      --deselect "tests/ops/test_softmax.py::test_softmax[" --deselect "tests/ops/test_norm.py::test_layernorm[" \
      --rlx-device cuda >"$OUT/$tool.log" 2>&1
  note "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1) $(grep -E 'passed|failed' "$OUT/$tool.log" | tail -1)"
done
[ "${SKIP_BENCH:-0}" = 1 ] && { echo "== summary"; cat "$S"; exit 0; }   # SKIP_BENCH=1: the checks only
echo "== bench"
timeout 260 python3 benchmarks/gpu/bert_cuda.py "$OUT/bert.json" >"$OUT/bench.log" 2>&1; note "bench rc=$?"
tail -9 "$OUT/bench.log" | cut -c1-1200
python3 - "$OUT/bert.json" benchmarks/results/h200-bert-cuda-2026-11-29-run22.json <<'PY' | tee -a "$S"
import json, sys
try:
    new, old = (json.load(open(p)) for p in sys.argv[1:3])
except Exception as exc:  # noqa: BLE001
    sys.exit(f"no comparison: {exc}")
key = lambda r: (r["batch"], r["tokens"], r["precision"])
ref = {key(r): r for r in old["rows"]}
for r in new["rows"]:
    o = ref.get(key(r), {})
    a, b = r.get("ratio_replay_vs_torch_graph"), o.get("ratio_replay_vs_torch_graph")
    flag = "" if a is None or b is None or a <= b + 0.05 else "  WORSE"
    print(f"{key(r)} replay {r.get('rlx_replay_ms', 0):.3f} ms, vs torch graph {a} (run22 {b}){flag}")
for f in ("replay_floor_first", "replay_floor"):
    n, o = new.get(f, {}), old.get(f, {})
    print(f"{f}: rlx {n.get('rlx_replay_sync_us')} us (run22 {o.get('rlx_replay_sync_us')}), "
          f"ratio {n.get('ratio_replay_sync')} (run22 {o.get('ratio_replay_sync')})")
PY
echo "== summary"; cat "$S"
