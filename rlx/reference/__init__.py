"""The numpy oracle: what every kernel's output is checked against.

``core`` holds the registry and ``run_reference``; each op family's
references live in the module of its name (elementwise, reduce, softmax,
norm, linear, glu, movement, cast, rope, attention, quant, fft, fp8, topk, penalty: the same names as
rlx/ir/ops/, rlx/lowering/, shaders/ and tests/ops/). Importing the package
registers them all."""

from rlx.reference import (  # noqa: F401  (each registers its family's references)
    attention,
    cast,
    elementwise,
    fft,
    fp8,
    glu,
    linear,
    movement,
    norm,
    penalty,
    quant,
    reduce,
    rope,
    softmax,
    sort,
    splat,
    topk,
)
from rlx.reference.core import REFERENCE, erf, erfc, register_reference, run_reference

__all__ = ["REFERENCE", "register_reference", "run_reference", "erf", "erfc"]
