#!/usr/bin/env bash
# Device, session 42, call a: rlx.splat beside gsplat in one run (100k and
# 1M Gaussians, 1920 x 1080, each stage's time; issue 21's ratio at 1M),
# then the LLM decode step's speed on the stand-in file (issue 18's GPU
# number at this code). The kernel library's first compile runs in the
# background beside gsplat's JIT build.
# Carry .gpu_carry (gguf, gsplat and plyfile wheels) and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session42_a.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
splat_vs_gsplat_step
stand_in_model
decode_speed session42
[ -n "${REAL:-}" ] && cp "$OUT/llm-speed-session42.log" "$REAL/" 2>/dev/null
echo "=== summary"; cat "$S"
