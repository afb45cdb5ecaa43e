#!/usr/bin/env bash
# H200, session 16, third call: the FFT suites and racecheck after rfft's
# unpacking moved into fft_shared's store on GPUs, the log-mel breakdown and
# fft_cuda.py's table again; then the GEMV sweep with CUPTI kernel durations
# beside the event-timed launches (issue 17; call b's attempt failed
# unseen), few files so that its log comes back. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "fft + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/test_signal.py --rlx-device cuda
suite "fft (cuda, gs 64)" fft64.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 64
sanitize racecheck "racecheck fft_shared" racecheck-fft.log tests/ops/test_fft.py -k "swizzle or rfft" --rlx-device cuda
t0=$(date +%s)
timeout 120 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >/dev/null 2>&1
note "fft_breakdown rc=$? in $(( $(date +%s) - t0 )) s"
python3 - "$OUT/fft-breakdown.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["case"], {k: round(v, 4) for k, v in r.items() if isinstance(v, float)})
    for side in ("rlx_kernels", "torch_graph_kernels"):
        if side in r:
            t = r[side]; print("  ", side, t["kernel_us_per_run"], "us", t["kernels_per_run"], "kernels:", [(n[:24], us) for n, us, _ in t["by_kernel"][:8]])
PY
timeout 100 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" 2>/dev/null | grep '^{' | python3 -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line); print(r.get('op'), r.get('n', r.get('batch')), r.get('correct'), {k: round(v, 4) for k, v in r.items() if k.endswith('_ms') or k.startswith('rlx_over')})
" 2>&1 | tee -a "$S"
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
