"""rlx.arg_types: the integer / real predicates every entry point's argument
checks share, and a few of those checks through their public callers."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.arg_types import is_integer, is_real
from rlx.errors import ConfigError, GraphError, InputError


@pytest.mark.parametrize("value", [0, -3, 2**80, np.int8(-1), np.uint64(2**63), np.int64(5)])
def test_integers(value):
    assert is_integer(value)
    assert is_real(value) == (abs(int(value)) < 2**1024)


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 1.0, np.float32(2), "3", None, [1], 1j])
def test_not_integers(value):
    assert not is_integer(value)


@pytest.mark.parametrize("value", [0.5, -1e300, np.float16(3), np.float32(-2.5), np.float64(1e-300), 7])
def test_finite_reals(value):
    assert is_real(value) and is_real(value, finite=False)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -np.inf, np.float32("nan"), 10**400, -(10**400)])
def test_reals_that_are_not_finite(value):
    """A float that is not finite, or an int beyond every float (float() would raise OverflowError)."""
    assert not is_real(value)
    assert is_real(value, finite=False)


@pytest.mark.parametrize("value", [True, np.bool_(False), "1.5", None, 1j, np.array([1.0]), [2.0]])
def test_not_reals(value):
    assert not is_real(value) and not is_real(value, finite=False)


def test_callers_accept_numpy_integers_and_refuse_bools():
    from rlx.models.sampling import Sampler
    from rlx.serve.batcher import Batcher

    assert Sampler(top_k=np.int64(5), seed=np.uint32(7)).top_k == 5
    with pytest.raises(InputError):
        Sampler(top_k=True)
    with pytest.raises(ConfigError):
        Batcher(lambda texts: texts, max_batch=np.bool_(True))
    Batcher(lambda texts: texts, max_batch=np.int32(4), max_wait_ms=np.float32(1.5)).close()


@pytest.mark.parametrize("value", [10**400, float("nan"), float("inf"), True])
def test_an_op_attribute_beyond_the_floats_is_a_graph_error(value):
    """layernorm's eps and a float attribute with a bound: a clean GraphError,
    never an OverflowError from float()."""
    import rlx

    g = rlx.Graph()
    x = g.input("x", (2, 4), "f32")
    w = g.param("w", (4,))
    with pytest.raises(GraphError):
        g.layernorm(x, w, w, eps=value)
    with pytest.raises(GraphError):
        g.rmsnorm(x, w, eps=value)
