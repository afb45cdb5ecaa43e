#!/usr/bin/env bash
# Device, session 38, call f (issue 17): the checks session 37 left at the
# direct rows' default unroll of four (its sanitizers ran at two): the
# quant kernel and end-to-end suites on cuda, the direct- and long-row
# cases at group size 32, memcheck and racecheck on them; and
# glu_linear of long rows (k = 1280: the GEMV forms the glu in its tile,
# then takes the direct rows) on cuda, with memcheck.
. benchmarks/gpu/common.sh
quant_checks "direct rows (unroll 4)" "direct_rows or long_rows" "direct_rows or long_rows" "direct_rows and f32 and 256"
suite "glu (cuda)" glu.log tests/ops/test_glu.py --rlx-device cuda
sanitize memcheck "memcheck glu long rows" memcheck-glu.log tests/ops/test_glu.py --rlx-device cuda -k "long_rows"
echo "=== summary"; cat "$S"
