#!/usr/bin/env bash
# H200, session 13, fourth call: (1) the FFT's path choice (the cost model
# picks fft_shared's one dispatch or the Stockham passes): the FFT and
# signal suites on cuda at group sizes 0 and 32, then both forms timed on
# the same shapes with the defaults' and the calibrated model's picks
# (fft_path_choice.py); (2) the decode step with row kernels over few rows
# capped at 32, 64 and 128 threads against the lowering's choice (a thread
# a column: 640 for Gemma's rmsnorm_add), one run; (3) set_rows_pair (a
# layer's K and V cache writes in one dispatch): the state suite on cuda
# at group sizes 0 and 32, memcheck, and the PDL-off trace.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "state + set_rows_pair (cuda, gs 0)" state.log tests/ops/test_state.py --rlx-device cuda
suite "state (cuda, gs 32)" state32.log tests/ops/test_state.py --rlx-device cuda --rlx-group-size 32
sanitize memcheck "set_rows_pair memcheck" memcheck.log tests/ops/test_state.py --rlx-device cuda -k one_dispatch
suite "fft + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/test_signal.py --rlx-device cuda
suite "fft (cuda, gs 32)" fft32.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 32
timeout 120 python3 benchmarks/gpu/fft_path_choice.py "$OUT/fft-choice.json" >"$OUT/fft-choice.log" 2>&1
note "fft path choice rc=$?"
grep '^{' "$OUT/fft-choice.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r['rows'], r['n'], 'shared', round(r['shared_us'], 2), 'stage', round(r['stage_us'], 2), r['faster'], 'defaults', r['defaults_pick'], 'calibrated', r['calibrated_pick'], 'err', '%.1e' % r['max_rel_error'])
" | tee -a "$S"
python3 -c "import json; print('rates', json.load(open('$OUT/fft-choice.json'))['calibrated_rates'])" | tee -a "$S"
KV_DTYPES=f32 ROW_THREADS="0 32 64 128" timeout 200 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed, row threads capped rc=$?"
grep '^{' "$OUT/llm-speed.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print('cap', r['row_threads_cap'], r['position'], round(r['step_ms_median'], 4), round(r['step_ms_min'], 4))
" | tee -a "$S"
pdl_off_trace 1 12
echo "=== summary ==="; cat "$S"
exit 0
