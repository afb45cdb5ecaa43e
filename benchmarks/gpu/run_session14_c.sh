#!/usr/bin/env bash
# H200, session 14, third call: the split-K attention loads its chunk's V
# rows before the scores (RLX_ATT_V_EARLY) where a thread holds one feature
# of the chunk. The attention suite on cuda at group sizes 0 and 32,
# memcheck and racecheck on decode splits that take it; the FFT and signal
# suites and the path timings with the cuda defaults' new FFT rates; the BERT FP8 tests (GPTQ
# calibration included) on cuda; then the decode step with and without
# the early V rows (KERNEL_DEFINES="RLX_ATT_V_EARLY=0", the same build) in
# one run, A-B-A, against the two-kernel form each time; the PDL-off trace
# of both. Carry .gpu_carry and .gg/gemma-header.bin.
# (The early V rows were reverted afterwards, RLX_ATT_V_EARLY with them: benchmarks/README.md, session 14.)
source "$(dirname "$0")/common.sh"
stand_in_model
attention_checks "early V" "(split_decode_gqa and 130) or one_value_feature" memcheck racecheck
suite "fft + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/test_signal.py --rlx-device cuda
timeout 90 python3 benchmarks/gpu/fft_path_choice.py "$OUT/fft-choice.json" >"$OUT/fft-choice.log" 2>&1
note "fft path choice rc=$?"
grep '^{' "$OUT/fft-choice.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print('  ', r['rows'], r['n'], 'shared', round(r['shared_us'], 2), 'stage', round(r['stage_us'], 2), 'defaults', r['defaults_pick'])
" | tee -a "$S"
suite "bert fp8 + calibration (cuda)" bert.log tests/models/test_bert.py --rlx-device cuda -k "fp8 or calibrat"
speed() {   # speed LABEL FILE [DEFINES]
  KERNEL_DEFINES="${3:-}" KV_DTYPES=f32 WITHOUT=" ;attention_split_merge" timeout 150 python3 \
    benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/$2.json" >"$OUT/$2.log" 2>&1
  note "decode speed $1 rc=$?"
  grep '^{' "$OUT/$2.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print('  defines', r['kernel_defines'] or '-', 'without', ','.join(r['without']) or '-', r['position'], round(r['step_ms_median'], 4), round(r['step_ms_min'], 4), r['thunks'])
" | tee -a "$S"
}
speed "early V (A)" speed-a1
speed "no early V (B)" speed-b RLX_ATT_V_EARLY=0
speed "early V (A again)" speed-a2
pdl_off_trace 2 4
KERNEL_DEFINES=RLX_ATT_V_EARLY=0 RLX_CUDA_PDL=0 timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf \
  "$OUT/trace-b.json" >"$OUT/trace-b.log" 2>&1
note "decode trace without early V (PDL off) rc=$?"
python3 -c "
import json; d = json.load(open('$OUT/trace-b.json'))
for r in d['rows']:
  print('pos', r['position'], 'span', round(r['span_us_median'], 1), 'kernels', r['kernels_per_step'], [(k['name'][:28], round(k['mean_us'], 2)) for k in r['by_kernel'][:2]])
" | tee -a "$S"
echo "=== summary ==="; cat "$S"
exit 0
