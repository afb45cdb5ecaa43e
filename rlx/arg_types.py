"""The two argument predicates every public entry point shares.

Python's ``bool`` is an ``int`` and numpy's scalars are not, so
``isinstance(v, int)`` both lets ``True`` through as 1 and refuses
``np.int64(3)``. Each caller raises its own error class (GraphError,
InputError, ConfigError, ...) with its own message; only the test lives here.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["is_integer", "is_real"]


def is_integer(value: object) -> bool:
    """Whether ``value`` is an integer: Python's or numpy's, never a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object, finite: bool = True) -> bool:
    """Whether ``value`` is a real number (an integer or a float, Python's or
    numpy's, never a bool) and, unless ``finite`` is False, one whose float is
    finite (so ``float(value)`` is safe: 10**400 is refused, not an OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    if not finite:
        return True
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False
