#!/usr/bin/env bash
# H200, session 16, second call: the elementwise suite on cuda (ew_chain's
# register slots), the log-mel and FFT breakdown again; fft_shared's register bound and stages a
# pass timed against each other (fft_variants.py, one process a variant,
# KERNEL_DEFINES), the FFT suite on cuda with the new defaults at two group
# sizes and racecheck; then the GEMV sweep with CUPTI kernel durations beside
# the event-timed launches (issue 17). Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "elementwise + signal (cuda, gs 0)" ew.log tests/ops/test_elementwise.py tests/test_signal.py --rlx-device cuda
suite "elementwise (cuda, gs 32)" ew32.log tests/ops/test_elementwise.py --rlx-device cuda --rlx-group-size 32
sanitize memcheck "memcheck chains" memcheck.log tests/ops/test_elementwise.py -k chain --rlx-device cuda
suite "fft (cuda, gs 0)" fft.log tests/ops/test_fft.py --rlx-device cuda
suite "fft (cuda, gs 64)" fft64.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 64
sanitize racecheck "racecheck fft_shared" racecheck-fft.log tests/ops/test_fft.py -k "shared or swizzle" --rlx-device cuda
for defines in "" "RLX_FFT_MIN_GROUPS=1" "RLX_FFT_PASS_STAGES=2"; do
  t0=$(date +%s)
  KERNEL_DEFINES="$defines" timeout 150 python3 benchmarks/gpu/fft_variants.py >>"$OUT/fft-variants.jsonl" 2>"$OUT/fft-variants-err.log"
  note "variant [$defines] rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/fft-variants.jsonl" | cut -c1-400)"
done
t0=$(date +%s)
timeout 120 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >"$OUT/fft-breakdown.log" 2>&1
note "fft_breakdown rc=$? in $(( $(date +%s) - t0 )) s"
python3 - "$OUT/fft-breakdown.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["case"], {k: round(v, 4) for k, v in r.items() if isinstance(v, float)})
    for side in ("rlx_kernels", "torch_graph_kernels", "cufft_graph_kernels"):
        if side in r:
            t = r[side]; print("  ", side, t["kernel_us_per_run"], "us", t["kernels_per_run"], "kernels:", [(n[:24], us) for n, us, _ in t["by_kernel"][:8]])
PY
t0=$(date +%s)
timeout 200 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" >"$OUT/fft-cuda.log" 2>&1
note "fft_cuda rc=$? in $(( $(date +%s) - t0 )) s"
grep '^{' "$OUT/fft-cuda.log" | python3 -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line); print(r.get('op'), r.get('n', r.get('batch')), r.get('correct'), {k: round(v, 4) for k, v in r.items() if k.endswith('_ms') or k.startswith('rlx_over')})
" 2>&1 | tee -a "$S"
timeout 100 ncu --kernel-name regex:fft_shared --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --section LaunchStats python3 -c "
import numpy as np, rlx
x = (np.random.default_rng(0).standard_normal((1024, 4096)) * (1 + 1j)).astype(np.complex64)
g = rlx.Graph(); g.set_outputs(y=g.fft(g.input('x', x.shape, 'c64')))
exe = rlx.compile(g, device='cuda')
for _ in range(4): exe.run(x=x)
" >"$OUT/ncu-fft.log" 2>&1
note "ncu fft_shared rc=$?"
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Compute \(SM\)|Memory Throughput|Local" "$OUT/ncu-fft.log" | head -12 | tee -a "$S"
t0=$(date +%s)
KERNEL_TRACE=1 timeout 300 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-trace.json" >"$OUT/gemv-trace.log" 2>&1
note "gemv trace rc=$? in $(( $(date +%s) - t0 )) s"
python3 - "$OUT/gemv-trace.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["format"], r["shape"], r["correct"], "events: rlx", round(r["rlx_gemv_us"], 1), "copy", round(r["copy_us"], 1), "torch", round(r["torch_bf16_graph_us"], 1),
          "| kernels: rlx", round(r.get("kernel_rlx_gemv_us", 0), 2), "copy", round(r.get("kernel_copy_us", 0), 2), "torch", round(r.get("kernel_torch_us", 0), 2),
          "frac", round(r.get("kernel_fraction_of_copy", 0), 3), "ratio", round(r.get("kernel_rlx_over_torch", 0), 3))
PY
echo "=== summary"; cat "$S"
