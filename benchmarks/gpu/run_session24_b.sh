#!/usr/bin/env bash
# H200, session 24, second call: gemv1n with its norm weights prefetched
# into L2 before the PDL wait; its suite on cuda (group sizes 0 and 32, the
# GEMV pinned by the test's fixture); the decode step on the stand-in with
# and without the fold, each run's device time beside its wall time (the
# host's share), with PDL on and off; the PDL-off trace. Carry .gpu_carry
# and .gg/gemma-header.bin. In session 24 the runs without the fold failed
# (llm_decode_speed.py's device-time list shadowed its device name; fixed
# after): each PDL setting has its with-the-fold rows only.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "norm gemv (cuda, gs 0)" ng.log tests/ops/test_norm_gemv.py --rlx-device cuda
suite "norm gemv (cuda, gs 32)" ng32.log tests/ops/test_norm_gemv.py --rlx-device cuda --rlx-group-size 32
for pdl in 1 0; do
  RLX_CUDA_PDL=$pdl WITHOUT=" ;norm_gemv" KV_DTYPES=f32 timeout 200 python3 benchmarks/gpu/llm_decode_speed.py \
    /tmp/z.gguf "$OUT/llm-speed-pdl$pdl.json" >"$OUT/llm-speed-pdl$pdl.log" 2>&1
  note "llm decode speed PDL=$pdl (with, without the fold) rc=$?"
  grep '^{' "$OUT/llm-speed-pdl$pdl.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print('  without', r['without'], 'pos', r['position'], 'step ms', round(r['step_ms_median'], 4), 'device ms', round(r['device_ms_median'], 4), 'tok/s', round(r['tok_per_s'], 1), 'thunks', r['thunks'])" | tee -a "$S"
done
pdl_off_trace 1 12
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/trace.json
echo "=== summary"; cat "$S"
