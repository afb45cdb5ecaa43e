#!/usr/bin/env bash
# H200, session 27, call a: what session 26 left unverified on a GPU, and
# where attention_split_merge's ~11.5 us a call goes:
# - tests/runtime/test_cuda_shim.py on cuda (its RLX_CUDA_PDL=auto case has
#   not run on a GPU);
# - Nsight Compute on attention_split_merge inside the decode step at
#   position ~128 with PDL off (stall reasons by SASS line, memory tables);
# - the decode step under the default launch (auto) and PDL off;
# - the splat suite and rlx.splat against gsplat after session 26's
#   determinant / factored-conic numerics;
# - BERT against PyTorch and the replay floor under auto (bert_cuda.py).
# Carry .gpu_carry (gguf, gsplat and plyfile wheels) and .gg/gemma-header.bin.
GSPLAT=1 source "$(dirname "$0")/common.sh"
stand_in_model
suite "cuda shim (incl. pdl=auto)" shim.log tests/runtime/test_cuda_shim.py
SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis"
t0=$(date +%s)
RLX_CUDA_PDL=0 KV_DTYPES=f32 timeout 150 ncu --clock-control none -k regex:attention_split_merge $SECTIONS \
  --launch-skip 90 --launch-count 2 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf /tmp/x.json >"$OUT/ncu-att.log" 2>&1
note "ncu attention_split_merge rc=$? in $(( $(date +%s) - t0 )) s"
grep -vE "^\{|^==PROF==|^ *$" "$OUT/ncu-att.log" | sed 's/  */ /g' | cut -c1-220 | head -230 >>"$S"
decode_speed pdl-auto
decode_speed pdl-off RLX_CUDA_PDL=0
suite "splat (cuda, gs 0)" splat.log tests/ops/test_splat.py --rlx-device cuda
wait $GSPLAT_PID; tail -2 "$OUT/gsplat-build.log" | tee -a "$S"
timeout 150 python3 benchmarks/gpu/splat_vs_gsplat.py "$OUT/splat-gsplat.json" >"$OUT/splat-gsplat.log" 2>&1
note "splat vs gsplat rc=$?"; cut -c1-1500 "$OUT/splat-gsplat.log" | tail -8 | tee -a "$S"
timeout 150 python3 benchmarks/gpu/bert_cuda.py "$OUT/bert.json" >"$OUT/bert.log" 2>&1
note "bert_cuda (auto) rc=$?"; tail -12 "$OUT/bert.log" | cut -c1-600 | tee -a "$S"
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
