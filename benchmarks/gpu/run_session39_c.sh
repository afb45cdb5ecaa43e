#!/usr/bin/env bash
# Device, session 39, call c (issue 17). Call b's Nsight Compute: the 4096 x
# 4096 GEMV (gemv1_q, direct rows) runs at 25% occupancy (128 registers,
# two groups an SM) and issues an instruction every 2.7 cycles a scheduler.
# The registers belong to the kernel's other paths (the pipelined stage):
# with RLX_QGEMV_DIRECT_ONLY=1 (those paths compiled out, a bound only:
# formats without int8 codes compute nothing) nvcc fits the direct rows in
# 64 registers without spills. Here: the glu suite on cuda after the
# long-rows test's n went 21 -> 133 (call a: the cost model chose
# dequantize + gemm at n = 21), memcheck on it; then 4096 x 4096 and
# 640 x 2048 at the default against the direct rows alone at two, four and
# five groups an SM, 16 and 8 rows a group; Nsight Compute's stall reasons
# on q4_k for the default and the best-guess variant.
WARM_CACHE=1 . benchmarks/gpu/common.sh
suite "glu (cuda)" glu.log tests/ops/test_glu.py --rlx-device cuda
sanitize memcheck "memcheck glu long rows" memcheck-glu.log tests/ops/test_glu.py --rlx-device cuda -k "long_rows"
D="RLX_QGEMV_DIRECT_ONLY=1"
for rows in 4096 640; do
  gemv_kernel_bench "r$rows-default" ONLY_ROWS=$rows
  gemv_kernel_bench "r$rows-direct-b4-rps1" ONLY_ROWS=$rows ROWS_PER_SIMD=1 KERNEL_DEFINES="$D RLX_QGEMV1_BOUNDS=__launch_bounds__(256,4)"
done
gemv_kernel_bench r4096-direct-b2 ONLY_ROWS=4096 KERNEL_DEFINES="$D"
gemv_kernel_bench r4096-direct-b4 ONLY_ROWS=4096 KERNEL_DEFINES="$D RLX_QGEMV1_BOUNDS=__launch_bounds__(256,4)"
gemv_kernel_bench r4096-direct-b5-rps1 ONLY_ROWS=4096 ROWS_PER_SIMD=1 KERNEL_DEFINES="$D RLX_QGEMV1_BOUNDS=__launch_bounds__(256,5)"
gemv_kernel_bench r4096-direct-b4-rps1-u2 ONLY_ROWS=4096 ROWS_PER_SIMD=1 KERNEL_DEFINES="$D RLX_QGEMV1_BOUNDS=__launch_bounds__(256,4) RLX_QGEMV_DIRECT_UNROLL=2"
for v in default variant; do
  defs=""; extra=""
  [ $v = variant ] && defs="$D RLX_QGEMV1_BOUNDS=__launch_bounds__(256,4)" && extra="ROWS_PER_SIMD=1"
  env $extra KERNEL_DEFINES="$defs" FORMATS=q4_k ONLY_ROWS=4096 SMALL=0 timeout 120 ncu --clock-control none -k regex:gemv1 \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats --print-details all python3 benchmarks/gpu/quant_gemv_cuda.py /tmp/n.json \
    >"$OUT/ncu-$v.log" 2>&1
  note "ncu q4_k $v rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|No Eligible|Warp Cycles Per Issued|Stall|DRAM Throughput" "$OUT/ncu-$v.log" \
    | sed 's/  */ /g' | head -40 | tee -a "$S"
done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -type f ! -name logs.tgz ! -name summary.txt -delete
echo "=== summary"; cat "$S"
