# Sourced by the H200 scripts (run_quant_check.sh, run_quant_sweep.sh,
# run_schedule_check.sh): $OUT, PATH and PYTHONPATH, note() (echo + the
# summary file $S), the gguf wheel from .gpu_carry/ when it was carried (the
# device reaches no index), the in-place build, and $P (the pytest command).
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
