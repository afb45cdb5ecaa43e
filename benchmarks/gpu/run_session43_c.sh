#!/usr/bin/env bash
# Device, session 43, call c (issue 21): Nsight Compute on one 1M-Gaussian
# RGB-only frame's kernels at 1920 x 1080 (projection, binning, the sort's
# histograms and scatters, the raster): where each kernel's time goes.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session43_c.sh
. benchmarks/gpu/common.sh
SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis"
timeout 300 ncu --clock-control none -k regex:"splat_project|splat_bin|sort_scatter|sort_histogram|splat_raster|scan_down" \
  $SECTIONS --launch-count 16 python3 benchmarks/gpu/splat_kernels.py --frames 1 >"$OUT/ncu-splat.log" 2>&1
note "ncu splat rc=$?"
grep -E "^  [a-z_]+<|void |Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Grid Size|Block Size|Warp Cycles Per Issued|est\. speedup" \
  "$OUT/ncu-splat.log" | sed 's/  */ /g' | cut -c1-200 | tee -a "$S" | head -260
[ -n "${REAL:-}" ] && cp "$OUT/ncu-splat.log" "$REAL/" 2>/dev/null
exit 0
