#!/usr/bin/env bash
# H200, session 10, first call: where the quantized GEMV's time goes (Nsight
# Compute on the vocabulary-sized and decode-step-sized products of each
# format, and on the decode step's own GEMVs inside its CUDA graph), the
# decode step's speed and in-graph trace, and the RGB-only splat renderer
# against gsplat. Carry .gpu_carry and .gg/gemma-header.bin.
export TORCH_EXTENSIONS_DIR=/tmp/tx MAX_JOBS=8 TORCH_CUDA_ARCH_LIST=9.0
OUT=${OUT:-/tmp/rlx-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index .gpu_carry/plyfile-*.whl .gpu_carry/gsplat-*.whl >"$OUT/pip-gsplat.log" 2>&1
( python3 -c "import gsplat.cuda._backend as b; print('gsplat _C', b._C)" >"$OUT/gsplat-build.log" 2>&1 ) &
GSPLAT_PID=$!
source "$(dirname "$0")/common.sh"
cp .gg/gemma-header.bin /tmp/z.gguf && truncate -s 253113024 /tmp/z.gguf
SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
ncu_brief() {   # the lines that say where the time goes
  grep -E "gemv|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Issued Ipc|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Executed Instructions  |L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Grid Size|Block Size|Waves Per SM|Stall|stall|Shared Memory Configuration|Dynamic Shared|est\. speedup|OPT " "$1" | sed 's/  */ /g' | cut -c1-260
}
for f in q4_k q8_0 q5_0 q6_k; do
  FORMATS=$f timeout 120 ncu --clock-control none -k regex:gemv $SECTIONS --launch-count 6 \
    python3 benchmarks/gpu/quant_gemv_cuda.py >"$OUT/ncu-$f.log" 2>&1
  note "ncu $f rc=$?"; ncu_brief "$OUT/ncu-$f.log" | tee -a "$S" | head -170
done
timeout 60 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv rc=$?"
gemv_table "$OUT/gemv.json"
KV_DTYPES=f32 timeout 60 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | sort -u | cut -c1-600 | tee -a "$S"
RLX_CUDA_PDL=0 timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/trace.json" >"$OUT/trace.log" 2>&1
note "decode trace (PDL off) rc=$?"
python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
for r in d['rows']:
  print('pos', r['position'], 'span', round(r['span_us_median'],1), 'busy', round(r['busy_us_median'],1), 'kernels', r['kernels_per_step'])
  for k in r['by_kernel']: print('  ', k['name'][:60], k['calls_per_step'], round(k['mean_us'],2), round(k['us_per_step'],1))
" "$OUT/trace.json" 2>&1 | tee -a "$S"
timeout 120 ncu --clock-control none -k regex:"gemv|rmsnorm|glu|set_rows" --launch-skip 2000 --launch-count 14 \
  --section SpeedOfLight --section LaunchStats --section WarpStateStats \
  python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf /tmp/x.json >"$OUT/ncu-decode.log" 2>&1
note "ncu decode-step kernels rc=$?"; ncu_brief "$OUT/ncu-decode.log" | tee -a "$S" | head -200
timeout 60 $P tests/ops/test_splat.py --rlx-device cuda >"$OUT/splat.log" 2>&1
note "splat suites (cuda) rc=$? $(tail -1 "$OUT/splat.log")"; grep -E "^FAILED" "$OUT/splat.log" | head -8
wait $GSPLAT_PID; tail -2 "$OUT/gsplat-build.log" | tee -a "$S"
timeout 150 python3 benchmarks/gpu/splat_vs_gsplat.py "$OUT/splat-gsplat.json" >"$OUT/splat-gsplat.log" 2>&1
note "splat vs gsplat rc=$?"; cut -c1-1200 "$OUT/splat-gsplat.log" | tail -6 | tee -a "$S"
exit 0
