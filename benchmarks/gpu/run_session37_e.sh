#!/usr/bin/env bash
# Device, session 37, call e (issue 17): the direct rows' default of four
# chunks a lane in flight (call d timed it through KERNEL_DEFINES; its
# suites ran at two). Cut to the session's last ~270 s of device time: the
# build and warm cache, the quant kernel and end-to-end suites on cuda, the
# direct-row and long-row cases at group size 32, the norm + GEMV suite.
. benchmarks/gpu/common.sh
suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "direct + long rows (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  --rlx-group-size 32 -k "direct_rows or long_rows"
suite "norm + gemv (cuda)" normgemv.log tests/ops/test_norm_gemv.py --rlx-device cuda
echo "=== summary"; cat "$S"
