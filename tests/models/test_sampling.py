"""rlx.models.sampling.Sampler on logits a penalty or a diverged model makes
extreme (found by probing the server with extreme sampling settings)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.errors import InputError, RlxError
from rlx.models.sampling import Sampler


def test_a_penalty_that_is_zero_in_f32_is_refused():
    # 1e-300 is > 0 as a Python float but 0 in f32, where the penalty divides.
    with pytest.raises(InputError, match="repetition_penalty"):
        Sampler(temperature=1.0, repetition_penalty=1e-300)
    with pytest.raises(InputError, match="repetition_penalty"):
        Sampler(temperature=1.0, repetition_penalty=1e300)


@pytest.mark.parametrize("top_k", [0, 3])
def test_logits_a_penalty_pushed_to_infinity_share_the_draw(top_k):
    # A subnormal f32 penalty divides positive logits past f32's range: those
    # tokens (ids 1 and 4, in the history) get every draw, the rest none.
    logits = np.array([0.5, 3.0, -1.0, 0.2, 2.0, -4.0], np.float32)
    sampler = Sampler(temperature=0.7, top_k=top_k, repetition_penalty=1e-40, seed=0)
    picks = {sampler.pick(logits, history=[1, 4, 5]) for _ in range(200)}
    assert picks == {1, 4}


@pytest.mark.parametrize("nans", [5, 1])
def test_nan_logits_raise_an_rlx_error(nans):
    sampler = Sampler(temperature=1.0, seed=0)
    logits = np.array([0.5, 1.0, -2.0, 0.0, 3.0], np.float32)
    logits[:nans] = np.nan
    with pytest.raises(RlxError, match="NaN"):
        sampler.pick(logits)


@pytest.mark.parametrize("name,value", [("temperature", "0.5"), ("temperature", None), ("temperature", float("inf")),
                                        ("top_k", 2.0), ("top_k", True), ("top_p", [0.5]), ("min_p", None),
                                        ("repetition_penalty", "x"), ("repetition_penalty", []), ("seed", -1),
                                        ("seed", 0.5), ("seed", "7")])
def test_settings_of_the_wrong_type_or_range_are_input_errors(name, value):
    # Each was a TypeError or ValueError from a comparison or from numpy before.
    with pytest.raises(InputError, match=name):
        Sampler(**{name: value})


def test_numpy_scalars_are_settings_like_python_numbers():
    sampler = Sampler(temperature=np.float32(0.5), top_k=np.int64(3), top_p=np.float64(0.9), seed=np.uint32(7))
    assert (sampler.temperature, sampler.top_k, sampler.top_p) == (0.5, 3, pytest.approx(0.9))
    assert sampler.pick(np.array([0.0, 2.0, 1.0, -1.0], np.float32)) in (0, 1, 2)
