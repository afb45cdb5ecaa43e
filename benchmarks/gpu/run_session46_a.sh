#!/usr/bin/env bash
# Device, session 46, call a (issue 18): the decode step's kernels with
# their params staged in shared memory at entry (RLX_STAGED_PARAMS,
# shaders/prelude/cuda.h: attention_split(_merge), gemv1_q / gemv1i_q /
# gemv1n_q, rmsnorm_rope, rmsnorm_rope_cache). Their suites on cuda,
# racecheck on the split attention and the GEMV (the staging is a new
# shared write and barrier), then the decode step on the stand-in with the
# staging (default) and without it (KERNEL_DEFINES=RLX_PARAMS_STAGE=0),
# alternating, on one machine. Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session46_a.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
stand_in_model
suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
suite "quant kernels + norm gemv + rope + rope cache (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py \
  tests/ops/test_norm_gemv.py tests/ops/test_rope.py tests/ops/test_rope_cache.py --rlx-device cuda
SAN_TIMEOUT=100 sanitize racecheck "racecheck split attention" race-att.log tests/ops/test_attention.py \
  --rlx-device cuda -k "split or active_length"
for v in 1 0 1 0; do decode_speed "stage-$v" KERNEL_DEFINES="RLX_PARAMS_STAGE=$v" RLX_CUDA_PDL=0; done
echo "=== summary"; cat "$S"
