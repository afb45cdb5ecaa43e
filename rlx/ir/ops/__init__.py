"""The built-in ops, one module per op family: their attributes, type
inference and validation, and the facts later passes read from their
``OpDef`` (view or not, precision class).

Each infer function checks everything a kernel would otherwise have to trust
(dtypes, ranks, bounds) and normalizes its attrs in place (defaults filled,
axes made positive, reshape's -1 resolved), so every later layer reads one
canonical form. Messages start with the op name and name the offending
shapes; ``Graph`` adds which node was being built.

The same family names are used in every layer: rlx/reference/<family>.py,
rlx/lowering/<family>.py, shaders/<family>.h, tests/ops/test_<family>.py.
Importing this package registers every family.
"""

from rlx.ir.ops import (
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
from rlx.ir.ops.linear import ACTIVATIONS
from rlx.ir.ops.rope import ROPE_LAYOUTS, rope_inv_freq

FAMILIES = {module.__name__.rsplit(".", 1)[1]: module.OPS for module in (
    leaves, elementwise, reduce, softmax, norm, linear, glu, movement, cast, rope, attention, quant, state, fft, fp8,
    topk, penalty, sort, splat)}

__all__ = ["ACTIVATIONS", "FAMILIES", "ROPE_LAYOUTS", "rope_inv_freq"]
