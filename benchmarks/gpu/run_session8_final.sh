#!/usr/bin/env bash
# H200 (session 8, last call): the CPU FFT rework changed FftParams (four
# new fields, zero on GPUs): the FFT and signal suites on cuda; the GEMV
# sweep with the lowering's new 32 rows a SIMD group; the decode speed on
# the zero-weight stand-in; the quant suites. Carry .gpu_carry and
# .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
timeout 90 $P tests/ops/test_fft.py tests/test_signal.py --rlx-device cuda >"$OUT/fft.log" 2>&1
note "fft+signal (cuda, gs 0) rc=$? $(tail -1 "$OUT/fft.log")"; grep -E "^FAILED" "$OUT/fft.log" | head -5
timeout 100 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
gemv_table "$OUT/gemv.json"
KV_DTYPES=f32 timeout 100 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | sort -u | tee -a "$S"
timeout 40 $P tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda >"$OUT/quant.log" 2>&1
note "quant kernels+e2e rc=$? $(tail -1 "$OUT/quant.log")"; grep -E "^FAILED" "$OUT/quant.log" | head -5
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude '*.json' --exclude summary.txt . && mv /tmp/logs.tgz . && find . -name '*.log' -delete)
exit 0
