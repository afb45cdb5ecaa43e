#!/usr/bin/env bash
# H200, one device call (~4 min with a cold build): the quant kernels' checks in
# short (kernels and end to end on cuda at the device's group size and at 32;
# memcheck, racecheck and synccheck on the GEMV), then
# benchmarks/gpu/quant_gemv_cuda.py at the lowering's own rows per group.
# Carry .gpu_carry (the gguf wheel). The steps are run_quant_sweep.sh's.
E2E=1 SANITIZE=1 exec bash "$(dirname "$0")/run_quant_sweep.sh" 0
