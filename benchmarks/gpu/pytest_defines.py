"""pytest under KERNEL_DEFINES (kernel_defines.py): the suites against a
compile-time variant of the kernel library, e.g. params by value
(``KERNEL_DEFINES=RLX_PARAMS_BY_VALUE=1 python3 benchmarks/gpu/pytest_defines.py
tests/ops/test_attention.py --rlx-device cuda``). Arguments go to pytest."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_defines import apply_kernel_defines  # noqa: E402  (the script's own folder)

if __name__ == "__main__":
    print("kernel defines", apply_kernel_defines(), flush=True)
    sys.exit(pytest.main(sys.argv[1:]))
