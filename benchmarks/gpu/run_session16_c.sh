#!/usr/bin/env bash
# H200, session 16, third call: the GEMV sweep with CUPTI kernel durations
# beside the event-timed launches (issue 17; call b's attempt failed
# unseen), few files so that its log comes back. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
t0=$(date +%s)
KERNEL_TRACE=1 timeout 240 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-trace.json" >"$OUT/gemv-trace.log" 2>&1
note "gemv trace rc=$? in $(( $(date +%s) - t0 )) s"
tail -25 "$OUT/gemv-trace.log" | grep -v '^{' | cut -c1-300
python3 - "$OUT/gemv-trace.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    if "kernel_trace_error" in r:
        print(r["format"], r["shape"], "trace error:", r["kernel_trace_error"][-600:]); continue
    print(r["format"], r["shape"], r["correct"], "events: rlx", round(r["rlx_gemv_us"], 1), "copy", round(r["copy_us"], 1), "torch", round(r["torch_bf16_graph_us"], 1),
          "| kernels: rlx", round(r.get("kernel_rlx_gemv_us", 0), 2), "copy", round(r.get("kernel_copy_us", 0), 2), "torch", round(r.get("kernel_torch_us", 0), 2),
          "frac", round(r.get("kernel_fraction_of_copy", 0), 3), "ratio", round(r.get("kernel_rlx_over_torch", 0), 3))
PY
echo "=== summary"; cat "$S"
