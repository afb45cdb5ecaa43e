#!/usr/bin/env bash
# H200, session 10, third call: the f32 GEMV's weights formed from the
# codes as the decoders form them (infinities of x as the dequantized
# product has them) and x read from the tile a group of four per vector
# load (rlx_q_xt_at / rlx_q_xt_group): the quant suites at three group
# sizes, memcheck and racecheck on the GEMV, the GEMV bench, the decode
# step's speed and trace, Nsight Compute on the 4096 x 4096 Q4_K GEMV.
# Carry .gg/gemma-header.bin and .gpu_carry (the gguf wheel).
OUT=${OUT:-/tmp/rlx-out}; mkdir -p "$OUT"
source "$(dirname "$0")/common.sh"
cp .gg/gemma-header.bin /tmp/z.gguf && truncate -s 253113024 /tmp/z.gguf
timeout 90 $P tests/ops/test_quant_kernels.py tests/ops/test_quant.py tests/ops/test_quant_pieces_host.py --rlx-device cuda \
  >"$OUT/quant.log" 2>&1
note "quant kernels+e2e (gs 0) rc=$? $(tail -1 "$OUT/quant.log")"; grep -E "^FAILED|Error" "$OUT/quant.log" | head -8 | cut -c1-300
timeout 60 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
gemv_table "$OUT/gemv.json"
SMALL=0 F32_FORM=1 timeout 60 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-f32.json" >"$OUT/gemv-f32.log" 2>&1
note "gemv bench, f32 form everywhere rc=$?"; gemv_table "$OUT/gemv-f32.json"
KV_DTYPES=f32 timeout 60 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | sort -u | cut -c1-400 | tee -a "$S"
RLX_CUDA_PDL=0 timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/trace.json" >"$OUT/trace.log" 2>&1
note "decode trace (PDL off) rc=$?"
python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
for r in d['rows'][:1]:
  print('pos', r['position'], 'span', round(r['span_us_median'],1), 'busy', round(r['busy_us_median'],1), 'kernels', r['kernels_per_step'])
  for k in r['by_kernel'][:12]: print('  ', k['name'][:40], k['calls_per_step'], round(k['mean_us'],2), round(k['us_per_step'],1))
" "$OUT/trace.json" 2>&1 | tee -a "$S"
FORMATS=q4_k SMALL=0 timeout 60 ncu --clock-control none -k regex:gemv --section SpeedOfLight \
  --section InstructionStats --launch-count 2 python3 benchmarks/gpu/quant_gemv_cuda.py >"$OUT/ncu-q4_k.log" 2>&1
note "ncu q4_k rc=$?"; grep -E "Duration|DRAM Throughput|Executed Instructions  " "$OUT/ncu-q4_k.log" \
  | sed 's/  */ /g' | cut -c1-120 | tee -a "$S"
for gs in 64 32; do
  timeout 60 $P tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda --rlx-group-size $gs -k "gemv" >"$OUT/quant$gs.log" 2>&1
  note "quant gemv (gs $gs) rc=$? $(tail -1 "$OUT/quant$gs.log")"; grep -E "^FAILED" "$OUT/quant$gs.log" | head -5
done
timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py \
  --rlx-device cuda -k "gemv and (q4_k or q5_0 or q6_k or q8_0 or iq4_xs)" >"$OUT/memcheck.log" 2>&1
note "gemv memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(tail -1 "$OUT/memcheck.log")"
timeout 50 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py \
  --rlx-device cuda -k "gemv1 and (q4_k or q5_0)" >"$OUT/racecheck.log" 2>&1
note "gemv1 racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.log" | tail -1) $(tail -1 "$OUT/racecheck.log")"
echo "=== summary ==="; cat "$S"
exit 0
