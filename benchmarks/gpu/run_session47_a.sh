#!/usr/bin/env bash
# Device, session 47, call a (issue 18): the staged params
# (RLX_STAGED_PARAMS, shaders/prelude/cuda.h; off by default) timed and
# checked. A fresh machine builds both kernel libraries at once (the
# default and KERNEL_DEFINES=RLX_PARAMS_STAGE=1; NVRTC builds one per
# process), then the decode step on the stand-in with and without the
# staging, alternating, at the shipped PDL setting; the staged library's
# suites (pytest_defines.py) and racecheck on the split attention; the
# staged decode step's PDL-off trace. First, torch only: what cuBLASLt offers
# for FP8 with outer-vector scales (lt_outer_probe.py). Each step is skipped once the call is
# past its start deadline (seconds). Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session47_a.sh
WARM_CACHE=0 . benchmarks/gpu/common.sh
stand_in_model
before() { [ "$SECONDS" -lt "$1" ] || { note "skipped past ${1} s: $2"; return 1; }; }
# cuBLASLt's FP8 outer-vector scales (issue 20), torch only: no rlx kernel.
timeout 90 python3 benchmarks/gpu/lt_outer_probe.py "$OUT/lt-outer.json" >"$OUT/lt-outer.log" 2>&1
note "lt_outer_probe rc=$?"; cut -c1-330 "$OUT/lt-outer.log" | tee -a "$S"
[ -n "${REAL:-}" ] && cp "$OUT/lt-outer.json" "$REAL/" 2>/dev/null
warm_kernel_cache & W0=$!
( t0=$(date +%s)
  KERNEL_DEFINES=RLX_PARAMS_STAGE=1 python3 -c "
import sys; sys.path.insert(0, 'benchmarks/gpu')
from kernel_defines import apply_kernel_defines; apply_kernel_defines()
import numpy as np, rlx
g = rlx.Graph(); x = g.input('x', (2, 3)); g.set_outputs(y=g.relu(x))
rlx.compile(g, device='cuda').run(x=np.ones((2, 3), np.float32))" >"$OUT/warm1.log" 2>&1
  echo "staged kernel cache warm rc=$? in $(( $(date +%s) - t0 )) s" >>"$OUT/warm1.log" ) & W1=$!
wait $W0 $W1; tail -1 "$OUT/warm.log" | tee -a "$S"; tail -1 "$OUT/warm1.log" | tee -a "$S"
for v in 1 0 1 0; do
  before 470 "decode stage-$v" || break
  if [ $v = 1 ]; then decode_speed "stage-1" KERNEL_DEFINES=RLX_PARAMS_STAGE=1; else decode_speed "stage-0"; fi
done
export KERNEL_DEFINES=RLX_PARAMS_STAGE=1
P="python3 benchmarks/gpu/pytest_defines.py -q -p no:cacheprovider"
before 500 "staged suites" && suite "staged: attention + norm gemv + rope + rope cache (cuda)" staged.log \
  tests/ops/test_attention.py tests/ops/test_norm_gemv.py tests/ops/test_rope.py tests/ops/test_rope_cache.py --rlx-device cuda
before 520 "staged quant" && suite "staged: quant kernels (cuda)" staged-quant.log tests/ops/test_quant_kernels.py --rlx-device cuda -k "gemv"
before 530 "staged trace" && pdl_off_trace 1 8
before 540 "racecheck" && SAN_TIMEOUT=50 sanitize racecheck "racecheck staged split attention" race-att.log \
  tests/ops/test_attention.py --rlx-device cuda -k "gqa_split_gemma_decode or split_masks_window or gqa_split_masks"
echo "=== summary"; cat "$S"
