#!/usr/bin/env bash
# Device, session 45, call f (issue 20): the FP8 GEMV's 16-code pieces
# (shaders/fp8.h gemv_f8: a lane reads a piece of a weight row in one
# 16-byte load where k and the scale blocks allow) on a GPU: the FP8 suite
# on cuda at group sizes 0 and 32 (new: whole-piece products at every
# scale granularity, every code through the piece decoder), memcheck on
# those tests, then fp8_gemm_cuda.py against torch._scaled_mm (call e, the
# code-a-lane loop: m = 1 qkv 12.8 us of kernel, down 35 us).
# Carry .gpu_carry (the gguf wheel: test_fp8_gemm imports the quant suite).
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session45_d.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
suite "fp8 (cuda, gs 0)" fp8.log tests/ops/test_fp8.py --rlx-device cuda
suite "fp8 (cuda, gs 32)" fp8-32.log tests/ops/test_fp8.py --rlx-device cuda --rlx-group-size 32
SAN_TIMEOUT=90 sanitize memcheck "memcheck fp8 gemv" memcheck-fp8.log tests/ops/test_fp8.py --rlx-device cuda \
  -k "whole_pieces or narrowed or decodes_every_code"
fp8_gemm_step 200
echo "=== summary"; cat "$S"
