#!/usr/bin/env bash
# H200, session 15, second call: the quant kernel suites on cuda after
# shaders/quant.h spelled its K-quant GEMV instantiations
# RLX_INSTANTIATE2_KQ_GEMV (the name tables come from
# rlx/runtime/shader_source.py's parse); then rlx serve on the H200 with
# the adaptive batch wait (a lone request never waits), one at a time
# against 32 concurrent clients, two rounds. Carry .gpu_carry (with
# .gpu_carry/serve, as run_session15_a.sh).
source "$(dirname "$0")/common.sh"
suite "quant kernels + quant (cuda)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
export PYTHONPATH=$PWD:$PWD/.gpu_carry/serve/site HF_HUB_OFFLINE=1
timeout 300 python3 benchmarks/test_serve_bench.py --rounds 2 --device cuda --model .gpu_carry/serve/minilm \
  --json "$OUT/serve-cuda.json" >"$OUT/serve-cuda.log" 2>&1
note "serve bench cuda rc=$?"; grep "rlx serve" "$OUT/serve-cuda.log" | tee -a "$S"; grep -i error "$OUT/serve-cuda.log" | head -3
echo "=== summary"; cat "$S"
