#!/usr/bin/env bash
# Device, session 42, call c: run_session42_b.sh cut to what the session's
# last device minutes allow: rlx.splat beside gsplat with each side's image
# on the host and on the device (issue 21), then rlx's decode against
# Hugging Face transformers with the copy-bandwidth floor (issue 18).
# Carry .gpu_carry (gguf, gsplat and plyfile wheels) and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session42_c.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
splat_vs_gsplat_step
stand_in_model
llm_vs_transformers 256
echo "=== summary"; cat "$S"
