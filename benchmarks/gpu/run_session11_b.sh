#!/usr/bin/env bash
# H200, session 11, second call: attention_split / attention_merge with
# their loads issued together (RLX_ATT_SPLIT_DSTEPS, _VKEYS, MERGE_ILP):
# the attention suites at three group sizes, memcheck and racecheck on the
# split kernels, the decode step's speed for split-K chunks of 16, 32 and
# 64 keys, the in-graph trace (PDL off) and Nsight Compute on both kernels
# inside the step. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
for gs in 0 64 32; do
  suite "attention (cuda, gs $gs)" "att$gs.log" tests/ops/test_attention.py --rlx-device cuda --rlx-group-size $gs
done
sanitize memcheck "split attention memcheck" memcheck.log tests/ops/test_attention.py --rlx-device cuda -k "split and not random"
sanitize racecheck "split attention racecheck" racecheck.log tests/ops/test_attention.py --rlx-device cuda -k "split_decode or split_masks"
KV_DTYPES="f32 f16" SPLIT_KEYS="16 32 64" timeout 200 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed, split keys 16 32 64 rc=$?"; grep '^{' "$OUT/llm-speed.log" | cut -c1-200 | tee -a "$S"
RLX_CUDA_PDL=0 timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/trace.json" >"$OUT/trace.log" 2>&1
note "decode trace (PDL off) rc=$?"; grep -E "^\{|us/step" "$OUT/trace.log" | head -34 | cut -c1-200 | tee -a "$S"
KV_DTYPES=f32 timeout 150 ncu --clock-control none -k regex:"attention_split|attention_merge" --launch-skip 60 \
  --launch-count 4 --section SpeedOfLight --section WarpStateStats --section LaunchStats \
  python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf /tmp/x.json >"$OUT/ncu-att.log" 2>&1
note "ncu attention rc=$?"
grep -E "attention_|Duration|Elapsed Cycles|SM Active Cycles|Warp Cycles Per Issued|Registers Per|Grid Size" \
  "$OUT/ncu-att.log" | sed 's/  */ /g' | cut -c1-160 | head -40 | tee -a "$S"
echo "=== summary ==="; cat "$S"
exit 0
