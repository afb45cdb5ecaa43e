#!/usr/bin/env bash
# H200, session 27, call b: the merge of split-K attention reading its
# partials in full predicated batches of 16 (shaders/attention.h,
# RLX_ATT_MERGE_ILP; was 8 with a pair-by-pair tail) on cuda, and what it
# does to the decode step; the cuda shim suite again (call a's log did not
# come back); the split-K chunk (SPLIT_KEYS 16 / 32: lowering constants,
# no kernel change) under PDL off and auto; the PDL-off trace; then
# attention_split_merge's stall samples by SASS line (Nsight Compute's source
# page, CSV). Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "cuda shim (incl. pdl=auto)" shim.log tests/runtime/test_cuda_shim.py
suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
suite "attention (cuda, gs 32)" att32.log tests/ops/test_attention.py --rlx-device cuda --rlx-group-size 32
decode_speed keys-pdl-off RLX_CUDA_PDL=0 SPLIT_KEYS="16 32"
decode_speed keys-auto SPLIT_KEYS="16 32"
pdl_off_trace 2 8
sanitize racecheck "racecheck split-merge" racecheck.log tests/ops/test_attention.py --rlx-device cuda -k "test_attention_split_decode_gqa and 513"
t0=$(date +%s)
RLX_CUDA_PDL=0 KV_DTYPES=f32 timeout 120 ncu --clock-control none -k regex:attention_split_merge \
  --section SourceCounters --section WarpStateStats --launch-skip 95 --launch-count 1 --page source --print-source sass --csv \
  python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf /tmp/x.json >"$OUT/ncu-att-source.csv" 2>"$OUT/ncu-att-source.err"
note "ncu source page rc=$? in $(( $(date +%s) - t0 )) s, $(wc -l < "$OUT/ncu-att-source.csv") lines"
tail -3 "$OUT/ncu-att-source.err" >>"$S"
rm -f "$OUT"/*.log "$OUT"/*.err
echo "=== summary"; cat "$S"
