#!/usr/bin/env bash
# Device, session 46, call c (issues 18 and 20), one call for a short
# budget (a fresh machine's NVRTC build of the library took 294 s in call
# a): the decode step on the stand-in at the shipped default (the staged
# params need a second library build: run_session46_a.sh), the attention suite
# and the FP8 gemm suite on cuda (the FP8 gemm's direct form among its
# cases), the FP8 products at 4096^3 and model shapes (the direct form
# against torch._scaled_mm tensorwise), the decode step's PDL-off trace,
# and rlx against transformers if time is left; each
# step is skipped once the call is past its start deadline (seconds).
# Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session46_c.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
stand_in_model
before() { [ "$SECONDS" -lt "$1" ] || { note "skipped past ${1} s: $2"; return 1; }; }
before 420 decode && decode_speed default
before 430 attention && suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
before 450 fp8 && suite "fp8 gemm (cuda)" fp8.log tests/ops/test_fp8_gemm.py --rlx-device cuda
before 460 fp8-bench && FP8_SHAPES="square minilm_up gemma270m_m128_qkv" FP8_MINILM=0 fp8_gemm_step 60
before 480 trace && pdl_off_trace 1 10
before 330 hf && llm_vs_transformers 256
echo "=== summary"; cat "$S"
