#!/usr/bin/env bash
# H200, session 21, second call: call a found the reworked gemv1i (two
# chunks a lane, cp.async slots) correct but barely faster (q4_k vocabulary
# 98.5 us kernel time). Nsight Compute on gemv1i Q4_K at the vocabulary
# shape (issue, stalls, instructions), the two experiment switches through
# KERNEL_DEFINES (one chunk a lane; four groups an SM), racecheck on the
# gemv1i cases, the GEMV cases at group size 64, and the decode step on the
# stand-in. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
FORMATS=q4_k SMALL=0 ONLY_ROWS=262144 timeout 150 ncu --kernel-name regex:gemv1i --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section InstructionStats --section LaunchStats \
  --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum \
  python3 benchmarks/gpu/quant_gemv_cuda.py >"$OUT/ncu-gemv1i.log" 2>&1
note "ncu gemv1i q4_k rc=$?"
grep -E "Duration|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Executed Ipc A|inst_executed.sum|No Eligible" "$OUT/ncu-gemv1i.log" | head -14 | tee -a "$S"
grep -E "issue_stalled" "$OUT/ncu-gemv1i.log" | awk '$NF+0 > 0.3' | tee -a "$S"
for defs in "RLX_QGEMV1I_LANE_CHUNKS=1u" "RLX_QGEMV1I_MIN_GROUPS=4"; do
  t0=$(date +%s)
  KERNEL_DEFINES="$defs" KERNEL_TRACE=1 SMALL=0 timeout 150 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-$defs.json" >"$OUT/gemv-$defs.log" 2>&1
  note "variant $defs rc=$? in $(( $(date +%s) - t0 )) s"
  python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
for r in d['rows']: print(r['format'], r['shape'], r['correct'], 'kernel us', round(r.get('kernel_rlx_gemv_us', 0), 1), 'copy', round(r.get('kernel_copy_us', 0), 1), 'frac', round(r.get('kernel_fraction_of_copy', 0), 3), 'torch ratio', round(r.get('kernel_rlx_over_torch', 0), 2))
" "$OUT/gemv-$defs.json" 2>&1 | tee -a "$S"
done
sanitize racecheck "racecheck gemv1i" racecheck.log tests/ops/test_quant_kernels.py --rlx-device cuda -k "gemv1i and (q4_k or q6_k) and 256"
suite "gemv cases (cuda, gs 64)" gs64.log tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 64 -k gemv
decode_speed_and_trace 1
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
