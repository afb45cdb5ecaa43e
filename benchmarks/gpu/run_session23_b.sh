#!/usr/bin/env bash
# Run at commit 28fbb2c plus temporary RLX_QEXP hooks (not committed; the RLX_QEXP=2/3 variants failed to compile: half + float in the hook).
# H200, session 23, second call: where gemv1's 12 us at 4096 x 4096 go
# (the copy of its bytes takes 3.5): Nsight Compute on one gemv1_q4_k
# launch (f32 pipelined form), then variants through KERNEL_DEFINES that
# leave a stage out (RLX_QEXP bit 1: x's loads; bit 2: the chunk dots) or
# change it (x staged in batches of 16; the whole group's rows prefetched
# into L2 before the PDL wait). Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
A="SMALL=0 ONLY_ROWS=4096 GEMV1I_F32=0"
FORMATS=q4_k SMALL=0 ONLY_ROWS=4096 GEMV1I_F32=0 timeout 150 ncu --clock-control none -k regex:gemv1 --launch-skip 3 \
  --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
  python3 benchmarks/gpu/quant_gemv_cuda.py >"$OUT/ncu-q4_k.log" 2>&1
note "ncu q4_k rc=$?"
grep -vE "^==PROF==|^\{" "$OUT/ncu-q4_k.log" | grep -E "[A-Za-z]" | grep -vE "^ +-+ " | cut -c1-160 | head -150 | tee -a "$S"
gemv_kernel_bench base $A
gemv_kernel_bench nox $A KERNEL_DEFINES="RLX_QEXP=1"
gemv_kernel_bench nodot $A KERNEL_DEFINES="RLX_QEXP=2"
gemv_kernel_bench neither $A KERNEL_DEFINES="RLX_QEXP=3"
gemv_kernel_bench batch16 $A KERNEL_DEFINES="RLX_QX_BATCH=16u"
gemv_kernel_bench prefetchall $A KERNEL_DEFINES="RLX_QGEMV1_PREFETCH_BYTES=1048576u"
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
