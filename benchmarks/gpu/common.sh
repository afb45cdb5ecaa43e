# Sourced by the H200 scripts (run_quant_check.sh, run_quant_sweep.sh, run_llm.sh,
# run_schedule_check.sh): $OUT, PATH and PYTHONPATH, note() (echo + the
# summary file $S), the gguf wheel from .gpu_carry/ when it was carried (the
# device reaches no index), the in-place build, $P (the pytest command) and
# the kernel cache warm-up (WARM_CACHE=0 skips it).
set -uo pipefail
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD
S="$OUT/summary.txt"; : >"$S"
note() { echo "$*" | tee -a "$S"; }
if compgen -G ".gpu_carry/gguf-*.whl" > /dev/null; then
  python3 -m pip install -q --no-deps --no-index .gpu_carry/gguf-*.whl >"$OUT/pip.log" 2>&1; note "gguf install rc=$?"
fi
timeout 300 python3 setup.py build_ext --inplace -q -j 16 >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
note "build ok"
P="python3 -m pytest -q -p no:cacheprovider"
# The first cuda compile of a fresh machine builds the whole kernel library
# with NVRTC (123 s on 2026-12-01, more as the library grows); a pytest step
# under its own timeout that pays it is killed before the cache is written.
# Pay it once here, untimed by the steps.
if [ "${WARM_CACHE:-1}" = 1 ]; then
  t0=$(date +%s)
  python3 -c "import numpy as np, rlx; g = rlx.Graph(); x = g.input('x', (2, 3)); g.set_outputs(y=g.relu(x)); rlx.compile(g, device='cuda').run(x=np.ones((2, 3), np.float32))" \
    >"$OUT/warm.log" 2>&1; note "kernel cache warm rc=$? in $(( $(date +%s) - t0 )) s"
fi

# gemv_table FILE: quant_gemv_cuda.py's rows, a line each, into the summary.
gemv_table() {
  python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
for r in d['rows']: print(r['format'], r['shape'], r.get('kernel', '')[:6], r['correct'], r['rows_per_group'], round(r['rlx_gemv_us'], 1), 'copy', round(r['copy_us'], 1), 'frac', round(r['fraction_of_copy_bandwidth'], 3), 'torch', round(r['torch_bf16_graph_us'], 1), 'ratio', round(r['rlx_over_torch'], 2))
" "$1" 2>&1 | tee -a "$S"
}
