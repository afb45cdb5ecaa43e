#!/usr/bin/env bash
# H200, session 10, first call: where the quantized GEMV's time goes (Nsight
# Compute on the vocabulary-sized and decode-step-sized products of each
# format, and on the decode step's own GEMVs inside its CUDA graph), the
# decode step's speed and in-graph trace, and the RGB-only splat renderer
# against gsplat. Carry .gpu_carry and .gg/gemma-header.bin.
GSPLAT=1 source "$(dirname "$0")/common.sh"
stand_in_model
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
decode_speed_and_trace
timeout 120 ncu --clock-control none -k regex:"gemv|rmsnorm|glu|set_rows" --launch-skip 2000 --launch-count 14 \
  --section SpeedOfLight --section LaunchStats --section WarpStateStats \
  python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf /tmp/x.json >"$OUT/ncu-decode.log" 2>&1
note "ncu decode-step kernels rc=$?"; ncu_brief "$OUT/ncu-decode.log" | tee -a "$S" | head -200
suite "splat suites (cuda)" splat.log tests/ops/test_splat.py --rlx-device cuda
wait $GSPLAT_PID; tail -2 "$OUT/gsplat-build.log" | tee -a "$S"
timeout 150 python3 benchmarks/gpu/splat_vs_gsplat.py "$OUT/splat-gsplat.json" >"$OUT/splat-gsplat.log" 2>&1
note "splat vs gsplat rc=$?"; cut -c1-1200 "$OUT/splat-gsplat.log" | tail -6 | tee -a "$S"
exit 0
