#!/usr/bin/env bash
# Device, session 39, call b (issue 17), right after call a
# (run_session38_f.sh) on the same machine: the GEMV table at the current
# default (CUPTI kernel times beside the copy and PyTorch's bf16 GEMV), the
# q6_k / q3_k split-scale-out A/B (run_gemv_split_scale_out.sh's two steps),
# then Nsight Compute on the 4096 x 4096 q4_k and q6_k direct-row GEMVs:
# sections and per-instruction stall samples (SASS), to find what holds
# them at ~1 TB/s where PyTorch's bf16 GEMV streams ~3 TB/s.
WARM_CACHE=1 . benchmarks/gpu/common.sh
gemv_kernel_bench default SMALL=1
gemv_kernel_bench split-scale-out SMALL=1 FORMATS="q6_k q3_k" KERNEL_DEFINES="RLX_QDOT_SPLIT_SCALE_OUT=1"
gemv_kernel_bench default-q3 SMALL=1 FORMATS="q3_k"
SECTIONS="--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section InstructionStats"
KEYS="Duration|Executed Instructions |Issued Ipc|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|L1/TEX Hit|L2 Hit|Memory Throughput|DRAM Throughput|Compute \(SM\)|Waves Per SM|Stall|Grid Size|Block Size|Dynamic Shared"
for f in q4_k q6_k; do
  FORMATS=$f ONLY_ROWS=4096 SMALL=0 timeout 120 ncu --clock-control none -k regex:gemv1 --launch-skip 3 --launch-count 1 \
    $SECTIONS python3 benchmarks/gpu/quant_gemv_cuda.py /tmp/n.json >"$OUT/ncu-$f.log" 2>&1
  note "ncu $f rc=$?"; grep -E "$KEYS" "$OUT/ncu-$f.log" | sed 's/  */ /g' | tee -a "$S"
  FORMATS=$f ONLY_ROWS=4096 SMALL=0 timeout 120 ncu --clock-control none -k regex:gemv1 --launch-skip 3 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no --page source --print-source sass --csv \
    python3 benchmarks/gpu/quant_gemv_cuda.py /tmp/n.json >"$OUT/src-$f.csv" 2>"$OUT/src-$f.err"
  note "ncu $f source rc=$? lines $(wc -l <"$OUT/src-$f.csv")"
done
tar czf "$OUT/ncu.tgz" -C "$OUT" src-q4_k.csv src-q6_k.csv ncu-q4_k.log ncu-q6_k.log && rm "$OUT"/src-*.csv
echo "=== summary"; cat "$S"
