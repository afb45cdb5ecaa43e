"""The numpy oracle: what every kernel's output is checked against.

``core`` holds the registry, ``run_reference`` and the references of the
elementwise, reduction, norm, softmax, matmul and data-movement ops;
``attention`` those of rope and attention. Importing the package registers
them all."""

from rlx.reference import attention as _attention  # noqa: F401  (registers rope and attention)
from rlx.reference.core import REFERENCE, erf, erfc, register_reference, run_reference

__all__ = ["REFERENCE", "register_reference", "run_reference", "erf", "erfc"]
