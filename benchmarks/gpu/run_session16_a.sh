#!/usr/bin/env bash
# H200, session 16, first call: the elementwise suite (the new fused chains)
# and the FFT suite (fft_shared's radix-16 passes) on cuda, racecheck on
# fft_shared; then where the FFT and log-mel graphs spend their GPU time
# (per thunk, whole replay, CUPTI kernel durations, next to PyTorch's),
# fft_cuda.py's table (as sessions 5-6) and Nsight Compute's view of
# fft_shared at N = 4096 when ncu is on the machine. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "elementwise + signal (cuda, gs 0)" ew.log tests/ops/test_elementwise.py tests/test_signal.py --rlx-device cuda
suite "elementwise (cuda, gs 32)" ew32.log tests/ops/test_elementwise.py --rlx-device cuda --rlx-group-size 32
suite "fft (cuda, gs 0)" fft.log tests/ops/test_fft.py --rlx-device cuda
suite "fft (cuda, gs 64)" fft64.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 64
sanitize racecheck "racecheck fft_shared" racecheck-fft.log tests/ops/test_fft.py -k "shared or swizzle" --rlx-device cuda
sanitize memcheck "memcheck chains" memcheck.log tests/ops/test_elementwise.py -k chain --rlx-device cuda
t0=$(date +%s)
timeout 240 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >"$OUT/fft-breakdown.log" 2>&1
note "fft_breakdown rc=$? in $(( $(date +%s) - t0 )) s"
python3 - "$OUT/fft-breakdown.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    keys = [k for k in r if k.endswith("_ms") or k.startswith("max_abs") or k == "rel_err" or k.startswith("rlx_replay_over")]
    print(r["case"], {k: round(r[k], 4) if isinstance(r[k], float) else r[k] for k in keys})
    for side in ("rlx_kernels", "torch_graph_kernels", "cufft_graph_kernels"):
        if side in r:
            t = r[side]; print("  ", side, t["kernel_us_per_run"], "us", t["kernels_per_run"], "kernels:", [(n[:40], us) for n, us, _ in t["by_kernel"][:8]])
    for p in r.get("per_thunk", []):
        print("   thunk", p["kernel"], p["run_one_us"], p["thunk"][:60])
PY
t0=$(date +%s)
timeout 200 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" >"$OUT/fft-cuda.log" 2>&1
note "fft_cuda rc=$? in $(( $(date +%s) - t0 )) s"
grep '^{' "$OUT/fft-cuda.log" | python3 -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line); print(r.get('op'), r.get('n', r.get('batch')), r.get('correct'), {k: round(v, 4) for k, v in r.items() if k.endswith('_ms') or k.startswith('rlx_over')})
" 2>&1 | tee -a "$S"
if command -v ncu >/dev/null; then
  t0=$(date +%s)
  timeout 200 ncu --kernel-name regex:fft_shared --launch-skip 2 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section LaunchStats --section InstructionStats \
    python3 -c "
import numpy as np, rlx
x = (np.random.default_rng(0).standard_normal((1024, 4096)) * (1 + 1j)).astype(np.complex64)
g = rlx.Graph(); g.set_outputs(y=g.fft(g.input('x', x.shape, 'c64')))
exe = rlx.compile(g, device='cuda')
for _ in range(4): exe.run(x=x)
" >"$OUT/ncu-fft.log" 2>&1
  note "ncu fft_shared rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles|Executed Ipc|Issue Slots|Block Limit|Shared Memory" "$OUT/ncu-fft.log" | head -40 | tee -a "$S"
else
  note "ncu: not on this machine"
fi
echo "=== summary"; cat "$S"
