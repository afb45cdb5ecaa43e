"""Op -> thunk lowering, one module per op family (the names of rlx/ir/ops/,
rlx/reference/, shaders/ and tests/ops/): which kernel runs each op, with
which bindings, params and grid. ``core`` holds the Lowering walk and the
Thunk records, ``barriers`` the hazard barriers. Importing the package
registers every family's lowerings."""

from rlx.lowering import (  # noqa: F401  (each registers its family's lowerings)
    attention,
    cast,
    elementwise,
    fft,
    fp8,
    glu,
    leaves,
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
    state,
    topk,
)
from rlx.lowering.barriers import place_barriers
from rlx.lowering.core import (
    DISPATCH,
    GEMM,
    LOWERINGS,
    Binding,
    Lowering,
    ResidentTensor,
    Thunk,
    Work,
    float_suffix,
    lowers,
)

__all__ = ["DISPATCH", "GEMM", "LOWERINGS", "Binding", "Lowering", "ResidentTensor", "Thunk", "Work", "float_suffix",
           "lowers", "place_barriers"]
