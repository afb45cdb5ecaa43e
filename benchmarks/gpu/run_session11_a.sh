#!/usr/bin/env bash
# H200, session 11, first call: the grouped-query split attention kernel
# (attention_split_gqa, one group per KV head and chunk of keys) against
# attention_split in the Gemma 3 decode step: its cuda suites, the step's
# speed for each keys-per-split (GQA_GPU_KEYS, 0 = attention_split) and KV
# dtype, the in-graph trace (PDL off) with each, and Nsight Compute on both
# attention kernels inside the step. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "attention (cuda, gs 0)" att0.log tests/ops/test_attention.py --rlx-device cuda
KV_DTYPES="f32 f16" GQA_GPU_KEYS="0 8 16 32 64" timeout 240 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed-gqa.json" >"$OUT/llm-speed-gqa.log" 2>&1
note "decode speed, GQA keys 0 8 16 32 64 rc=$?"; grep '^{' "$OUT/llm-speed-gqa.log" | cut -c1-300 | tee -a "$S"
for gqa in 0 16; do
  GQA_GPU_KEYS=$gqa RLX_CUDA_PDL=0 timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf \
    "$OUT/trace-gqa$gqa.json" >"$OUT/trace-gqa$gqa.log" 2>&1
  note "decode trace (PDL off) GQA $gqa rc=$?"; grep -E "^\{|us/step" "$OUT/trace-gqa$gqa.log" | head -16 | cut -c1-200 | tee -a "$S"
done
SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis"
for gqa in 0 16; do
  KV_DTYPES=f32 GQA_GPU_KEYS=$gqa timeout 150 ncu --clock-control none -k regex:"attention_split|attention_merge" \
    --launch-skip 60 --launch-count 6 $SECTIONS python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf /tmp/x.json \
    >"$OUT/ncu-att$gqa.log" 2>&1
  note "ncu attention GQA $gqa rc=$?"
  grep -E "attention_|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Grid Size|Block Size|Warp Cycles Per Issued|Stall|est\. speedup" \
    "$OUT/ncu-att$gqa.log" | sed 's/  */ /g' | cut -c1-220 | head -60 | tee -a "$S"
done
echo "=== summary ==="; cat "$S"
exit 0
