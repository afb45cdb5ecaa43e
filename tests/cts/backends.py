"""What each shim does not support, with the reason: the one place the
conformance suite's backends differ (IREE's CTS keeps the same table).

Keys: a concept (a test file's name without `test_`, e.g. "queues"), a test
function's name, or a test function's name with one parameter value,
"test_name[arg=value]". conftest.py skips every matching test on that
backend with the reason shown; a key that names no test is an error.

Only static facts belong here. A shim that is not usable on this machine
(no GPU, no Mac) skips everything with that reason instead, and features that
depend on the device found at run time (cuda's bias epilogue needs cuBLASLt)
are checked inside the tests.
"""

from __future__ import annotations

UNSUPPORTED: dict[str, dict[str, str]] = {
    "host": {},
    "cuda": {},
    "metal": {
        "test_user_kernel_disk_cache": "metal compiles source in memory (no disk cache)",
        "test_gemm_bias_range_is_checked": "no bias epilogue: MPS lacks one "
                                           "(test_gemm_bias_epilogue_matches_numpy checks the refusal)",
        "test_gemm_gives_the_same_bits_on_a_device_opened_again[bias=True]": "no bias epilogue: MPS lacks one",
    },
}
