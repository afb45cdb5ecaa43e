#!/usr/bin/env bash
# H200, session 26, call b: the decode step (f32 cache, the zero-weight
# stand-in) with PDL on, off and `auto` (each executable times both launch
# forms over its first runs; never run on a GPU before), the PDL-off kernel
# trace (attention_split_merge was 11.9 us a call in sessions 13-18, before
# session 26's merge read each split's (m, l) once), the late PDL trigger
# (a kernel library of its own to compile), then the PDL-contract and
# schedule suites and the fuzzer's model graphs, quantized, FFT, FP8, sort
# and attention cases on cuda (the norm-GEMV and GLU-GEMV folds are
# GPU-only); summary.txt comes back even if the call is cut off. Carry
# .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
decode_speed early RLX_CUDA_PDL=1
decode_speed pdl-off RLX_CUDA_PDL=0
decode_speed auto RLX_CUDA_PDL=auto
pdl_off_trace 2 12
decode_speed late RLX_CUDA_PDL=1 KERNEL_DEFINES=RLX_PDL_LATE_TRIGGER=1
suite "pdl contract + schedules (cuda, gs 0)" pdl.log tests/runtime/test_pdl_contract.py tests/cts/test_schedule.py \
  tests/runtime/test_launch_explore.py --rlx-device cuda
timeout 150 $P tests/fuzz/test_fuzz.py --rlx-device cuda -k "test_random_model_graph or quant or fft or fp8 or scaled or sort or attention" \
  --fuzz-runs 600 --fuzz-seed 1000 >"$OUT/fuzz-model.log" 2>&1
note "fuzz model graphs + quant + fft + fp8 + sort + attention (cuda) rc=$? $(tail -1 "$OUT/fuzz-model.log")"
grep -E "^FAILED" "$OUT/fuzz-model.log" | head -8 | cut -c1-250
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
