#!/usr/bin/env bash
# Device, session 45, call a (issues 21 and 18): racecheck on the splat
# suite's random scenes and half-precision scene (session 44's branchy
# register raster and 256-Gaussian batches share group memory between a
# batch's loads and the pixels that read them; session 45's first call ran
# memcheck only), then a second measurement of rlx's decode against
# transformers on the stand-in (the first of this session: 3.007x on an
# H100), for the ratio's spread. Every line goes into the summary as it
# comes. Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session45_a.sh
WARM_CACHE=bg . benchmarks/gpu/common.sh
stand_in_model
wait_warm
SAN_TIMEOUT=150 sanitize racecheck "racecheck splat (random scenes, f16)" racecheck-splat.log tests/ops/test_splat.py \
  --rlx-device cuda -k "random_scenes or half_precision"
SAN_TIMEOUT=100 sanitize synccheck "synccheck splat (random scenes)" synccheck-splat.log tests/ops/test_splat.py \
  --rlx-device cuda -k "random_scenes"
llm_vs_transformers 256
tail -3 "$OUT/llm-cuda.log" | cut -c1-400 | tee -a "$S"
echo "=== summary"; cat "$S"
