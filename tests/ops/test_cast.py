"""cast between f32 and f16 against rlx/reference/core.py on the device
under test."""

from __future__ import annotations

import pytest
from conftest import assert_matches_reference

import rlx

from .helpers import rand as _rand


@pytest.mark.parametrize("pair", [("f32", "f16"), ("f16", "f32")])
def test_cast(rng, pair):
    g = rlx.Graph()
    x = g.input("x", (33,), pair[0])
    g.set_outputs(y=g.cast(x, pair[1]))
    assert_matches_reference(g, {"x": _rand(rng, (33,), pair[0])})
