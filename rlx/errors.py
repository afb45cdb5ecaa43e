"""Every error rlx raises on purpose is an ``RlxError``.

User mistakes are caught in Python, before anything crosses into C, and the
message names what was wrong and what was expected.
"""

from __future__ import annotations


class RlxError(Exception):
    """Base class of every error rlx raises on purpose."""


class GraphError(RlxError):
    """The graph is malformed: a cycle, a dangling node, no outputs."""


class ShapeError(RlxError):
    """Shapes do not agree (inference or a run input)."""


class DTypeError(RlxError):
    """A dtype is unknown, unsupported by an op, or does not match."""


class UnsupportedOpError(RlxError):
    """An op has no lowering on the chosen device."""


class InputError(RlxError):
    """A run input is missing, unknown, or of the wrong shape or dtype."""


class ParameterError(RlxError):
    """A parameter (weight) is missing or does not match its declaration."""


class KernelCompileError(RlxError):
    """Kernel source failed to compile; the message holds the compiler output."""


class DeviceError(RlxError):
    """A device failed to open, allocate, or execute."""


class DeviceUnavailableError(DeviceError):
    """The requested device cannot be used on this machine (with the reason)."""


class MemoryPlanError(RlxError):
    """The memory plan does not fit the device."""


class ScheduleError(RlxError):
    """A thunk table, binding table or segment plan is malformed (a wrong
    type, a negative size, too many bindings, an unknown binding name), or a
    Program is asked for a thunk it does not have; raised before C sees it."""


class ConfigError(RlxError):
    """An ``RLX_*`` environment variable or option has an invalid value."""


class UnsupportedPrecisionError(ConfigError):
    """The requested precision cannot run on the chosen device (``precision="bf16"`` off the host)."""


class ModelLoadError(RlxError):
    """A model folder or file is missing, malformed, or describes an unsupported model."""


class CapacityError(RlxError):
    """A run needs more room than a capacity-bounded buffer was compiled
    with (e.g. a splat frame's (tile, Gaussian) pairs past the renderer's
    capacity with automatic re-planning off); the message gives both numbers."""


class MissingDependencyError(RlxError):
    """An optional part of rlx needs a package that is not installed; the
    message names the extra to install (e.g. ``pip install 'rlx[ray]'``)."""


class CorpusError(InputError):
    """A corpus file for ``rlx embed --ray`` cannot be used: unreadable, an
    unknown format, no such text column, or a row whose text is not a string."""


class ManifestMismatchError(RlxError):
    """An output folder holds parts of a different run (another input, model,
    precision, text column or block size) than the one asked for."""
