#!/usr/bin/env bash
# Device, session 33, call a (issue 19): fft_shared's register form
# (shaders/fft.h: Stockham passes with a row's elements in its threads'
# registers, padded slots on CUDA) on a GPU for the first time:
# fft_shared_bench.py beside cuFFT at every length 32..4096 under three
# register budgets (RLX_FFT_MIN_GROUPS 4, 3, 2), layout 2 (the register
# form) and 1 (the digit passes) in the same process; then the FFT,
# window and signal suites on cuda at group sizes 0 and 64 with
# fft_variants.py, and fft_cuda.py's table with the log-mel breakdown.
source "$(dirname "$0")/common.sh"
t0=$(date +%s)
FFT_SIZES="32 64 128 256 512 1024 2048 4096" FFT_SWIZZLE="2 1" timeout 200 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/fft-shared-bench.json" "" "-DRLX_FFT_MIN_GROUPS=3" "-DRLX_FFT_MIN_GROUPS=2" >"$OUT/fft-shared-bench.log" 2>&1
note "fft_shared_bench rc=$? in $(( $(date +%s) - t0 )) s"
python3 -c "
import json, sys
for r in json.load(open(sys.argv[1]))['rows']:
    print(r['defines'] or 'default', r['n'], 'layout', r['swizzle'], r['us'], 'cufft', r['cufft_us'], 'ratio', r['ratio'], 'err', '%.1e' % r['rel_err'], r['usage'][:60])
" "$OUT/fft-shared-bench.json" 2>&1 | tee -a "$S"
fft_suites register
fft_benches
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
