#!/usr/bin/env bash
# Device, session 39, call c (issue 17). It ran, but the kernel library did
# not compile there (run_session39_d.sh says why); d supersedes it. Call b's Nsight Compute: the 4096 x
# 4096 GEMV (gemv1_q, direct rows) runs at 25% occupancy (128 registers,
# two groups an SM) and issues an instruction every 2.7 cycles a scheduler.
# The registers belong to gemv1_q's other paths (the pipelined stage); the
# direct rows alone, gemv1d_q (shaders/quant_gemv.h), fit 64 registers
# without spills (nvcc -Xptxas -v), four groups an SM. Here: the quant and
# glu suites on cuda at group sizes 0 and 32 (gemv1d's cases, the glu
# long-rows test at n = 133), memcheck and racecheck on gemv1d; then the
# GEMV table at 4096 x 4096 and the decode step's shapes with gemv1d
# against gemv1 (GEMV1D=0), at 16 and 8 rows a group, at four and five
# groups an SM; Nsight Compute on q4_k for gemv1 and gemv1d.
WARM_CACHE=1 . benchmarks/gpu/common.sh
suite "quant kernels + e2e + glu (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py \
  tests/ops/test_glu.py --rlx-device cuda
suite "direct rows + glu (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py tests/ops/test_glu.py \
  --rlx-device cuda --rlx-group-size 32 -k "direct_rows or long_rows or glu_linear"
sanitize memcheck "memcheck gemv1d" memcheck.log tests/ops/test_quant_kernels.py tests/ops/test_glu.py \
  --rlx-device cuda -k "(direct_rows and gemv1d) or long_rows"
sanitize racecheck "racecheck gemv1d" racecheck.log tests/ops/test_quant_kernels.py tests/ops/test_glu.py \
  --rlx-device cuda -k "(direct_rows and gemv1d and (q4_k or q6_k or q8_0)) or long_rows"
for rows in 4096 640 1024; do
  gemv_kernel_bench "r$rows-gemv1" ONLY_ROWS=$rows GEMV1D=0
  gemv_kernel_bench "r$rows-gemv1d" ONLY_ROWS=$rows
  gemv_kernel_bench "r$rows-gemv1d-rps1" ONLY_ROWS=$rows ROWS_PER_SIMD=1
done
gemv_kernel_bench r4096-gemv1d-b5-rps1 ONLY_ROWS=4096 ROWS_PER_SIMD=1 KERNEL_DEFINES="RLX_QGEMV1D_BOUNDS=__launch_bounds__(256,5)"
gemv_kernel_bench r4096-gemv1d-u2-rps1 ONLY_ROWS=4096 ROWS_PER_SIMD=1 KERNEL_DEFINES="RLX_QGEMV_DIRECT_UNROLL=2"
for v in gemv1 gemv1d; do
  flag=1; [ $v = gemv1 ] && flag=0
  GEMV1D=$flag FORMATS=q4_k ONLY_ROWS=4096 SMALL=0 timeout 120 ncu --clock-control none -k regex:gemv1 \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats --print-details all python3 benchmarks/gpu/quant_gemv_cuda.py /tmp/n.json \
    >"$OUT/ncu-$v.log" 2>&1
  note "ncu q4_k $v rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|No Eligible|Warp Cycles Per Issued|Stall|DRAM Throughput" "$OUT/ncu-$v.log" \
    | sed 's/  */ /g' | head -30 | tee -a "$S"
done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -type f ! -name logs.tgz ! -name summary.txt -delete
echo "=== summary"; cat "$S"
