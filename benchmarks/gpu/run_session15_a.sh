#!/usr/bin/env bash
# H200 machine, session 15: dynamic batching where one text does not fill
# the device. rlx serve's throughput, 32 concurrent clients against one at
# a time (benchmarks/test_serve_bench.py), and Embedder.encode per text
# against batch_size (benchmarks/embed_batch_sizes.py), on the machine's
# 16-core CPU and on the H200; the CPU calibrated first (its row-kernel /
# gemm decisions printed). The model is all-MiniLM-L6-v2 with its weights
# rounded to f16 on disk (f32 in the graph: the speed is f32's), carried
# with starlette and uvicorn, which the image lacks:
#   .gpu_carry/serve/minilm (config, tokenizer, f16 model.safetensors),
#   .gpu_carry/serve/site (the starlette and uvicorn packages).
# Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
export PYTHONPATH=$PWD:$PWD/.gpu_carry/serve/site HF_HUB_OFFLINE=1
M=.gpu_carry/serve/minilm
nproc | sed 's/^/cores: /' | tee -a "$S"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$S"
timeout 120 python3 -m rlx calibrate --device cpu --force >"$OUT/calibrate.log" 2>&1
note "cpu calibrate rc=$?"; grep -E "^  (gemm|matmul_rows|small-M f32)" "$OUT/calibrate.log" | cut -c1-240 | tee -a "$S"
for dev in cpu cuda; do
  RLX_VERBOSE=0 timeout 200 python3 benchmarks/embed_batch_sizes.py --device $dev --model $M \
    --json "$OUT/embed-batch-$dev.json" >"$OUT/embed-batch-$dev.log" 2>&1
  note "embed batch sizes $dev rc=$?"; grep "batch_size" "$OUT/embed-batch-$dev.log" | tee -a "$S"
done
for dev in cpu cuda; do
  timeout 240 python3 benchmarks/test_serve_bench.py --rounds 1 --device $dev --model $M \
    --json "$OUT/serve-$dev.json" >"$OUT/serve-$dev.log" 2>&1
  note "serve bench $dev rc=$?"; grep "rlx serve" "$OUT/serve-$dev.log" | tee -a "$S"; tail -3 "$OUT/serve-$dev.log" | grep -i error
done
echo "=== summary"; cat "$S"
