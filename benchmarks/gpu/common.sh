# Sourced by the H200 scripts (run_quant_check.sh, run_quant_sweep.sh, run_llm.sh,
# run_schedule_check.sh): $OUT, PATH and PYTHONPATH, note() (echo + the
# summary file $S), the gguf wheel from .gpu_carry/ when it was carried (the
# device reaches no index), the in-place build, $P (the pytest command) and
# the kernel cache warm-up (WARM_CACHE=0 skips it). GSPLAT=1 first starts
# gsplat's JIT build from the carried wheels in the background ($GSPLAT_PID:
# the script waits on it before it needs gsplat), so it overlaps rlx's build.
# Then the shared steps below: fft_suites, fft_benches, shared_bench, fft_sanitizers, fft_register_sanitizers, mixed_checks, gemv_table, gemv_kernel_bench, suite, sanitize, quant_checks, attention_checks, gemv_benches, pdl_off_trace,
# stand_in_model, decode_speed, decode_speed_and_trace, sort_splat_suites, splat_kernels_step, splat_vs_gsplat_step,
# fp8_gemm_step and llm_vs_transformers.
set -uo pipefail
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
if [ "${GSPLAT:-0}" = 1 ]; then
  export TORCH_EXTENSIONS_DIR=/tmp/tx MAX_JOBS=${MAX_JOBS:-8} TORCH_CUDA_ARCH_LIST=9.0
  python3 -m pip install -q --no-deps --no-index .gpu_carry/plyfile-*.whl .gpu_carry/gsplat-*.whl \
    >"$OUT/pip-gsplat.log" 2>&1
  ( t0=$(date +%s); python3 -c "import gsplat.cuda._backend as b; print('gsplat _C', b._C)" >"$OUT/gsplat-build.log" 2>&1
    echo "gsplat build rc=$? in $(( $(date +%s) - t0 )) s" >>"$OUT/gsplat-build.log" ) &
  GSPLAT_PID=$!
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD
# The summary: in $REAL when the caller sets it (the device tool's $OUT, so
# that what ran comes back even after a timeout), else in $OUT.
S="${REAL:-$OUT}/summary.txt"; : >"$S"
note() { echo "$*" | tee -a "$S"; }
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
if compgen -G ".gpu_carry/gguf-*.whl" > /dev/null; then
  python3 -m pip install -q --no-deps --no-index .gpu_carry/gguf-*.whl >"$OUT/pip.log" 2>&1; note "gguf install rc=$?"
fi
timeout 480 python3 setup.py build_ext --inplace -q -j 16 >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
note "build ok"
P="python3 -m pytest -q -p no:cacheprovider"
# The first cuda compile of a fresh machine builds the whole kernel library
# with NVRTC (123 s on 2026-12-01, more as the library grows); a pytest step
# under its own timeout that pays it is killed before the cache is written.
# Pay it once here, untimed by the steps.
# WARM_CACHE=bg starts it in the background instead (beside a step that
# builds with nvcc), and wait_warm waits for it and notes its line.
# warm_kernel_cache [DEFINES [LOG]]: the library compiled under
# KERNEL_DEFINES=DEFINES (none: the default), its line into $OUT/LOG
# (warm.log).
warm_kernel_cache() {
  local t0=$(date +%s) log="$OUT/${2:-warm.log}"
  KERNEL_DEFINES="${1:-}" python3 -c "
import sys; sys.path.insert(0, 'benchmarks/gpu')
from kernel_defines import apply_kernel_defines; apply_kernel_defines()
import numpy as np, rlx
g = rlx.Graph(); x = g.input('x', (2, 3)); g.set_outputs(y=g.relu(x))
rlx.compile(g, device='cuda').run(x=np.ones((2, 3), np.float32))" >"$log" 2>&1
  echo "kernel cache${1:+ ($1)} warm rc=$? in $(( $(date +%s) - t0 )) s" >>"$log"
}
wait_warm() { [ -n "${WARM_PID:-}" ] && wait "$WARM_PID"; tail -1 "$OUT/warm.log" | tee -a "$S"; }
# warm_kernel_caches DEFINES: the default library and the one compiled under
# KERNEL_DEFINES=DEFINES, built at once (NVRTC builds one per process), for
# an A/B in one call; their lines into the summary.
warm_kernel_caches() {
  warm_kernel_cache & local w0=$!
  warm_kernel_cache "$1" warm1.log & local w1=$!
  wait $w0 $w1; tail -1 "$OUT/warm.log" | tee -a "$S"; tail -1 "$OUT/warm1.log" | tee -a "$S"
}
case "${WARM_CACHE:-1}" in
  1) warm_kernel_cache; tail -1 "$OUT/warm.log" | tee -a "$S" ;;
  bg) warm_kernel_cache & WARM_PID=$! ;;
esac

# fft_benches: fft_breakdown.py (where the log-mel and FFT graphs spend
# their GPU time) and fft_cuda.py's table, their summaries into the summary.
fft_benches() {
  local t0=$(date +%s)
  timeout 120 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >/dev/null 2>&1
  note "fft_breakdown rc=$? in $(( $(date +%s) - t0 )) s"
  python3 benchmarks/gpu/summaries.py fft-breakdown "$OUT/fft-breakdown.json" 2>&1 | tee -a "$S"
  timeout 100 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" 2>/dev/null \
    | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
}

# fft_suites LABEL: the FFT, window and signal suites on cuda at group sizes
# 0 and 64, then fft_variants.py (fft_shared's kernel beside cuFFT's, CUPTI)
# into fft-variants-LABEL.json and the summary.
fft_suites() {
  local label=$1 W="tests/ops/test_fft.py tests/ops/test_fft_window.py" t0
  suite "fft + window + signal (cuda, gs 0)" fft.log $W tests/test_signal.py --rlx-device cuda
  suite "fft + window (cuda, gs 64)" fft64.log $W --rlx-device cuda --rlx-group-size 64
  t0=$(date +%s)
  timeout 120 python3 benchmarks/gpu/fft_variants.py >"$OUT/fft-variants-$label.json" 2>"$OUT/fft-variants-$label.log"
  note "fft_variants ($label) rc=$? in $(( $(date +%s) - t0 )) s"; tee -a "$S" <"$OUT/fft-variants-$label.json"
}

# shared_bench LABEL DEFINES...: fft_shared_bench.py (FFT_SIZES,
# FFT_SWIZZLE and FFT_REGISTER_ONLY from the caller's environment) under
# each -D variant into fft-shared-LABEL.json, a line a row into the summary.
shared_bench() {
  local label=$1 t0=$(date +%s); shift
  timeout 200 python3 benchmarks/gpu/fft_shared_bench.py "$OUT/fft-shared-$label.json" "$@" \
    >"$OUT/fft-shared-$label.log" 2>&1
  note "fft_shared_bench $label rc=$? in $(( $(date +%s) - t0 )) s"
  python3 -c "
import json, sys
for r in json.load(open(sys.argv[1]))['rows']:
    print(r['defines'] or 'default', r.get('kernel', 'fft_shared'), r['n'], 'layout', r['swizzle'], 't', r.get('threads'),
          'gr', r.get('group_rows'), r['us'], 'cufft', r['cufft_us'], 'ratio', r['ratio'], 'err', '%.1e' % r['rel_err'],
          str(r['usage'])[:60])
" "$OUT/fft-shared-$label.json" 2>&1 | tee -a "$S"
}

# fft_sanitizers: racecheck and memcheck on fft_shared's register form as
# the lowering runs it on cuda (every register-form length of
# test_transforms_match_numpy, rfft's fused half-length store, the window
# and signal suites' staged loads).
fft_sanitizers() {
  local w="tests/ops/test_fft_window.py tests/test_signal.py"
  fft_register_sanitizers
  SAN_TIMEOUT=100 sanitize racecheck "racecheck window+signal" racecheck-w.log $w --rlx-device cuda
  SAN_TIMEOUT=100 sanitize memcheck "memcheck window+signal" memcheck-w.log $w --rlx-device cuda
}

# fft_register_sanitizers: racecheck on every register-form length of
# test_transforms_match_numpy, memcheck on those and rfft's fused
# half-length store.
fft_register_sanitizers() {
  local k="transforms_match_numpy and (N32- or N64- or N128- or N256- or N512- or N1024- or N2048- or N4096-) and backward"
  SAN_TIMEOUT=100 sanitize racecheck "racecheck fft register" racecheck.log tests/ops/test_fft.py -k "$k" --rlx-device cuda
  SAN_TIMEOUT=100 sanitize memcheck "memcheck fft register" memcheck.log tests/ops/test_fft.py -k "$k or half_length" \
    --rlx-device cuda
}

# gemv_table FILE: quant_gemv_cuda.py's rows, a line each, into the summary.
gemv_table() {
  python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
for r in d['rows']: print(r['format'], r['shape'], r.get('kernel', '')[:6], r['correct'], r['rows_per_group'], round(r['rlx_gemv_us'], 1), 'copy', round(r['copy_us'], 1), 'frac', round(r['fraction_of_copy_bandwidth'], 3), 'torch', round(r['torch_bf16_graph_us'], 1), 'ratio', round(r['rlx_over_torch'], 2))
" "$1" 2>&1 | tee -a "$S"
}

# gemv_kernel_bench LABEL [ENV...]: quant_gemv_cuda.py with CUPTI kernel
# times (KERNEL_TRACE=1) under ENV (SMALL, ONLY_ROWS, MIN_GROUPS,
# GEMV1I_MIN_ROWS, F32_FORM, KERNEL_DEFINES, ...) into gemv-LABEL.json, its
# rows a line each into the summary.
gemv_kernel_bench() {
  local label=$1 t0=$(date +%s); shift
  env "$@" KERNEL_TRACE=1 timeout 200 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-$label.json" \
    >"$OUT/gemv-$label.log" 2>&1
  note "== gemv $label ($*) rc=$? in $(( $(date +%s) - t0 )) s"
  python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
for r in d['rows']: print(r['format'], r['shape'], r['kernel'][:6], r['rows_per_group'], r['correct'], 'kernel us', round(r.get('kernel_rlx_gemv_us', 0), 2), 'copy', round(r.get('kernel_copy_us', 0), 2), 'frac', round(r.get('kernel_fraction_of_copy', 0), 3), 'torch', round(r.get('kernel_torch_us', 0), 2), 'ratio', round(r.get('kernel_rlx_over_torch', 0), 2))
" "$OUT/gemv-$label.json" 2>&1 | tee -a "$S"
}

# suite LABEL LOG PYTEST_ARGS...: a pytest run under 90 s, its last line and
# first failures into the summary.
suite() {
  local label=$1 log=$2; shift 2
  timeout 90 $P "$@" >"$OUT/$log" 2>&1
  note "$label rc=$? $(tail -1 "$OUT/$log")"; grep -E "^FAILED" "$OUT/$log" | head -8 | cut -c1-250
}

# mixed_checks: the FFT, window and signal suites on cuda, racecheck on the
# mixed-radix lengths, memcheck on them and the half-length tests.
mixed_checks() {
  suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py \
    tests/test_signal.py --rlx-device cuda
  local k="transforms_match_numpy and (N100- or N400- or N1000-) and backward"
  SAN_TIMEOUT=100 sanitize racecheck "racecheck fft mixed" racecheck-m.log tests/ops/test_fft.py --rlx-device cuda -k "$k"
  SAN_TIMEOUT=100 sanitize memcheck "memcheck fft mixed + half lengths" memcheck-m.log tests/ops/test_fft.py \
    --rlx-device cuda -k "$k or half_length"
}

# sanitize TOOL LABEL LOG PYTEST_ARGS...: compute-sanitizer (memcheck or
# racecheck) on a pytest run under SAN_TIMEOUT s (default 60), its summary
# line into the summary.
sanitize() {
  local tool=$1 label=$2 log=$3; shift 3
  timeout "${SAN_TIMEOUT:-60}" compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 9 $P "$@" >"$OUT/$log" 2>&1
  note "$label rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$log" | tail -1) $(tail -1 "$OUT/$log")"
}

# quant_checks LABEL GS32_K MEMCHECK_K RACECHECK_K: the quant kernel and
# end-to-end suites on cuda (group size 0), the kernel suite's -k GS32_K
# cases at group size 32, then memcheck and racecheck on their -k cases.
quant_checks() {
  local label=$1 gs32=$2 mem=$3 race=$4
  suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
  suite "quant kernels $label (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py --rlx-device cuda \
    --rlx-group-size 32 -k "$gs32"
  sanitize memcheck "memcheck $label" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda -k "$mem"
  sanitize racecheck "racecheck $label" racecheck.log tests/ops/test_quant_kernels.py --rlx-device cuda -k "$race"
}

# attention_checks LABEL K TOOL...: the attention suite on cuda at group
# sizes 0 and 32, then each compute-sanitizer TOOL on its -k K cases.
attention_checks() {
  local label=$1 k=$2; shift 2
  suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
  suite "attention (cuda, gs 32)" att32.log tests/ops/test_attention.py --rlx-device cuda --rlx-group-size 32
  for tool in "$@"; do
    sanitize "$tool" "$label $tool" "$tool.log" tests/ops/test_attention.py --rlx-device cuda -k "$k"
  done
}

# gemv_benches: quant_gemv_cuda.py as the lowering picks the kernels, then
# with the f32 form everywhere (F32_FORM=1) at the two large shapes.
gemv_benches() {
  timeout 60 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
  gemv_table "$OUT/gemv.json"
  SMALL=0 F32_FORM=1 timeout 60 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-f32.json" >"$OUT/gemv-f32.log" 2>&1
  note "gemv bench, f32 form everywhere rc=$?"; gemv_table "$OUT/gemv-f32.json"
}

# stand_in_model: /tmp/z.gguf, the Gemma file's real header and zero tensor
# bytes (no decode kernel's time depends on the weights' values).
stand_in_model() { cp .gg/gemma-header.bin /tmp/z.gguf && truncate -s 253113024 /tmp/z.gguf; }

# pdl_off_trace POSITIONS TOP: llm_decode_trace.py on the stand-in with
# PDL off (true kernel durations), the first POSITIONS positions' TOP
# kernels (calls a step, mean us a call, us a step) into the summary.
pdl_off_trace() {
  RLX_CUDA_PDL=0 timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/trace.json" >"$OUT/trace.log" 2>&1
  note "decode trace (PDL off) rc=$?"
  python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
for r in d['rows'][:int(sys.argv[2])]:
  print('pos', r['position'], 'span', round(r['span_us_median'], 1), 'busy', round(r['busy_us_median'], 1), 'kernels', r['kernels_per_step'])
  for k in r['by_kernel'][:int(sys.argv[3])]:
    print('  ', k['name'][:40], round(k['calls_per_step'], 1), round(k['mean_us'], 2), round(k['us_per_step'], 1))
" "$OUT/trace.json" "$1" "$2" 2>&1 | tee -a "$S"
}

# decode_speed LABEL ENV...: llm_decode_speed.py (f32 cache) on the
# stand-in under the environment ENV (RLX_CUDA_PDL=0, KERNEL_DEFINES=...),
# each position's step and device time, tok/s, thunks and launch mode
# into the summary.
decode_speed() {
  local label=$1; shift
  env "$@" KV_DTYPES=f32 timeout 240 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
    "$OUT/llm-speed-$label.json" >"$OUT/llm-speed-$label.log" 2>&1
  note "llm decode speed $label ($*) rc=$?"
  grep '^{' "$OUT/llm-speed-$label.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print('  block', r.get('decode_block', 1), 'pos', r['position'], 'step ms', round(r['step_ms_median'], 4), 'device ms', round(r['device_ms_median'], 4), 'tok/s', round(r['tok_per_s'], 1), 'thunks', r['thunks'], r.get('launch_mode'), r.get('launch_times'))" | tee -a "$S"
}

# decode_speed_and_trace [POSITIONS]: llm_decode_speed.py (f32 cache) on the
# stand-in and its in-graph trace with PDL off (true kernel durations), the
# first POSITIONS positions' top kernels into the summary.
decode_speed_and_trace() {
  local positions=${1:-2}
  KV_DTYPES=f32 timeout 60 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" \
    >"$OUT/llm-speed.log" 2>&1
  note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | sort -u | cut -c1-400 | tee -a "$S"
  pdl_off_trace "$positions" 12
}


# sort_splat_suites GS...: the sort and splat suites on cuda at each group
# size (0: the lowering's own), a line each into the summary.
sort_splat_suites() {
  local gs
  for gs in "$@"; do
    suite "sort + splat (cuda, gs $gs)" "splat-gs$gs.log" tests/ops/test_sort.py tests/ops/test_splat.py \
      --rlx-device cuda --rlx-group-size "$gs"
  done
}

# splat_kernels_step: splat_kernels.py (where a replayed frame spends its
# GPU time, CUPTI) under 100 s, its summary into the summary file, the JSON
# beside the summary when $REAL is the device tool's $OUT.
splat_kernels_step() {
  timeout 100 python3 benchmarks/gpu/splat_kernels.py "$OUT/splat-kernels.json" >"$OUT/splat-kernels.log" 2>&1
  note "splat_kernels rc=$?"
  python3 benchmarks/gpu/summaries.py splat-kernels "$OUT/splat-kernels.json" 2>&1 | tee -a "$S"
  [ -n "${REAL:-}" ] && cp "$OUT/splat-kernels.json" "$REAL/" 2>/dev/null
}

# splat_vs_gsplat_step: splat_vs_gsplat.py after gsplat's JIT build (GSPLAT=1)
# and the kernel cache (WARM_CACHE=bg), its last rows into the summary, the
# JSON beside the summary when $REAL is the device tool's $OUT.
splat_vs_gsplat_step() {
  wait_warm
  wait $GSPLAT_PID; tail -1 "$OUT/gsplat-build.log" | tee -a "$S"
  timeout 180 python3 benchmarks/gpu/splat_vs_gsplat.py "$OUT/splat-gsplat.json" >"$OUT/splat-gsplat.log" 2>&1
  note "splat vs gsplat rc=$?"; cut -c1-3000 "$OUT/splat-gsplat.log" | tail -3 | tee -a "$S"
  [ -n "${REAL:-}" ] && cp "$OUT/splat-gsplat.json" "$REAL/" 2>/dev/null
}

# fp8_gemm_step LIMIT: fp8_gemm_cuda.py (FP8 x FP8 products against
# torch._scaled_mm: thunks, the replayed product and both sides' kernels)
# under LIMIT s, one line a product into the summary, the JSON beside the
# summary when $REAL is the device tool's $OUT.
fp8_gemm_step() {
  local t0=$(date +%s)
  timeout "$1" python3 benchmarks/gpu/fp8_gemm_cuda.py "$OUT/fp8_gemm_cuda.json" >"$OUT/fp8-gemm-bench.log" 2>&1
  note "fp8 gemm bench rc=$? in $(( $(date +%s) - t0 )) s"
  [ -n "${REAL:-}" ] && cp "$OUT/fp8_gemm_cuda.json" "$REAL/" 2>/dev/null
  python3 benchmarks/gpu/summaries.py fp8-gemm "$OUT/fp8_gemm_cuda.json" 2>&1 | tee -a "$S"
}

# llm_vs_transformers GEN: llm_cuda.py on the stand-in (stand_in_model first),
# rlx's decode against transformers bf16 with a static cache and generate's
# compile, GEN tokens after a 128-token prompt, with the copy-bandwidth
# floor; its summary into the summary file.
llm_vs_transformers() {
  local t0=$(date +%s)
  HF_PEERS=hf_static_compiled timeout 300 python3 benchmarks/gpu/llm_cuda.py /tmp/z.gguf "$OUT/llm-cuda.json" "$1" \
    >"$OUT/llm-cuda.log" 2>&1
  note "llm_cuda (rlx vs transformers static compiled) rc=$? in $(( $(date +%s) - t0 )) s"
  [ -n "${REAL:-}" ] && cp "$OUT/llm-cuda.json" "$REAL/" 2>/dev/null
  python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
print('gpu', d['gpu'], 'hf', d['hf_source'][:80])
print('rlx decode tok/s', round(d['rlx'].get('decode_tok_s', 0), 1), 'prompt tok/s', round(d['rlx'].get('prefill_tok_s', 0), 1))
for k, v in d['peers'].items(): print(k, {a: (round(b, 4) if isinstance(b, float) else b) for a, b in v.items()})
print('ratios', {k: round(v, 3) for k, v in d.items() if k.startswith('rlx_over')}, 'floor tok/s', round(d['floor_tok_s']), 'fraction of floor', round(d.get('fraction_of_floor', 0), 4))
" "$OUT/llm-cuda.json" 2>&1 | tee -a "$S"
}
