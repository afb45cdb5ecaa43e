"""Executable: one compiled graph bound to a device, an arena and its
resident parameters. ``run`` validates inputs in Python, then hands dense
buffers to the Cython core, which does the whole run without the GIL."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from rlx.errors import InputError, ParameterError
from rlx.ir.dtype import DType, bf16, to_bf16
from rlx.ir.graph import as_bindings
from rlx.runtime.views import ARENA, RESIDENT


@dataclass(frozen=True)
class IOSpec:
    name: str
    shape: tuple[int, ...]
    dtype: DType

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(int(np.prod(self.shape, dtype=np.int64)), self.shape[-1] if self.shape else None)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype.name}{list(self.shape)}"


@dataclass(frozen=True)
class CompileStats:
    nodes: int
    thunks: int
    fused: dict
    dispatches: int
    gemms: int
    barriers: int
    segments: int
    arena_bytes: int
    arena_no_reuse_bytes: int
    resident_bytes: int
    outputs_pinned: bool


_max = np.maximum.reduce   # ndarray.max without the Python wrapper


def _unsigned(dtype: np.dtype) -> np.dtype | None:
    """The unsigned integer dtype of a signed one's width (None for others)."""
    return np.dtype(f"u{dtype.itemsize}") if dtype.kind == "i" else None


class Executable:
    """Run with ``exe.run({"x": array})`` or ``exe.run(x=array)``; returns a
    dict of output name -> new numpy array. Safe to call from several
    threads (runs of one executable are serialized; different executables
    run concurrently)."""

    def __init__(self, *, program, device, target, arena, resident, input_specs, output_specs,
                 param_slots, index_checks, stats: CompileStats, plan, thunks, state_slots=None, thunk_table=None,
                 bindings=None,
                 lifetimes=(),
                 compile_report=(), graph=None, segments=()):
        self.program = program          # rlx._core.Program: the C-level API for Cython users
        self.device = device
        self.target = target
        self._arena = arena
        self._resident = resident
        self.input_specs: tuple[IOSpec, ...] = tuple(input_specs)
        self.output_specs: tuple[IOSpec, ...] = tuple(output_specs)
        self._input_names = frozenset(s.name for s in self.input_specs)
        self._param_slots = param_slots  # name -> (IOSpec, buffer, byte offset): own or shared resident
        self._state_slots = dict(state_slots or {})   # the same for states (g.state)
        self._index_checks = index_checks  # (input position, rows, op label)
        # What run() checks per input, precomputed: (name, numpy dtype, shape).
        self._expect = tuple((s.name, s.dtype.numpy, s.shape) for s in self.input_specs)
        # Index range checks as one reduction each: viewed as unsigned, a
        # negative index is larger than any row count, so max < rows covers
        # both ends. (position, unsigned view dtype, rows, label)
        self._index_fast = tuple((pos, _unsigned(self.input_specs[pos].dtype.numpy), rows, label)
                                 for pos, rows, label in index_checks)
        self._out_alloc = tuple((s.shape, s.dtype.numpy) for s in self.output_specs)
        self._out_names = tuple(s.name for s in self.output_specs)
        self.stats = stats
        self.plan = plan
        self.thunks = thunks
        self.thunk_table = thunk_table      # rlx._core.ThunkTable the program was made from (thunk i = thunks[i])
        # binding name -> the buffer it resolves to ("arena", "resident", shared params)
        self.bindings = dict(bindings) if bindings is not None else {ARENA: arena, RESIDENT: resident}
        self.lifetimes = tuple(lifetimes)   # what the memory plan was given (for checks and debugging)
        self.compile_report = tuple(compile_report)   # one line (or block) per pass
        self.graph = graph                  # the graph after fusion and precision: what was lowered
        self.segments = tuple(segments)
        self._param_lock = threading.Lock()

    # ---- parameters ----------------------------------------------------------
    @property
    def param_specs(self) -> tuple[IOSpec, ...]:
        return tuple(spec for spec, _, _ in self._param_slots.values())

    def set_params(self, params: Mapping[str, np.ndarray] | None = None, **named: np.ndarray) -> None:
        """Write new values for parameters; they stay resident across runs."""
        values = as_bindings(params, ParameterError, "params")
        values.update(named)
        unknown = sorted(set(values) - set(self._param_slots), key=repr)
        if unknown:
            raise ParameterError(f"unknown parameter(s) {unknown}; the graph declares {sorted(self._param_slots)}")
        from rlx.fp8 import expand_params  # float weights of precision="fp8" params: codes and scales

        values = expand_params(values, {name: spec.dtype for name, (spec, _, _) in self._param_slots.items()})
        prepared = {name: coerce_param(self._param_slots[name][0], value) for name, value in values.items()}
        with self._param_lock:
            for name, array in prepared.items():
                _, buffer, offset = self._param_slots[name]
                buffer.write(offset, array)

    # ---- state -----------------------------------------------------------------
    @property
    def state_specs(self) -> tuple[IOSpec, ...]:
        return tuple(spec for spec, _, _ in self._state_slots.values())

    def read_state(self, name: str) -> np.ndarray:
        """A copy of a state's current value (after the last run)."""
        spec, buffer, offset = self._state_slot(name)
        raw = buffer.read(offset, spec.nbytes)
        return np.frombuffer(raw, spec.dtype.numpy).reshape(spec.shape).copy()

    def write_state(self, name: str, value: np.ndarray) -> None:
        """Replaces a state's value (for every executable sharing it)."""
        spec, buffer, offset = self._state_slot(name)
        array = np.asarray(value)
        if array.shape != spec.shape:
            raise InputError(f"state {name!r}: value of shape {array.shape}, expected {spec.shape}")
        buffer.write(offset, np.ascontiguousarray(array, dtype=spec.dtype.numpy))

    def reset_state(self) -> None:
        """Zeros every state of this executable."""
        for name, (spec, _, _) in self._state_slots.items():
            self.write_state(name, np.zeros(spec.shape, spec.dtype.numpy))

    def _state_slot(self, name: str):
        try:
            return self._state_slots[name]
        except KeyError:
            raise InputError(f"unknown state {name!r}; the graph declares {sorted(self._state_slots)}") from None

    # ---- running -------------------------------------------------------------
    @contextmanager
    def copying_io(self) -> Iterator[None]:
        """Inside, runs copy every input and output through the arena, as on
        a device whose memory is not the caller's. Elsewhere (RLX_BIND_IO,
        the CPU) a run reads large inputs and writes large outputs in the
        caller's arrays, so the arena never holds them: profiling that
        afterwards runs thunks one at a time (Program.run_one) over the
        last run's inputs makes that run inside this."""
        before = self.program.binds_io
        self.program.binds_io = False
        try:
            yield
        finally:
            self.program.binds_io = before

    def run(self, inputs: Mapping[str, np.ndarray] | None = None, **named: np.ndarray) -> dict[str, np.ndarray]:
        if named:
            feed = {} if inputs is None else self._feed(inputs)
            feed.update(named)
        elif type(inputs) is dict:
            feed = inputs      # only read here
        else:
            feed = self._feed(inputs)
        if len(feed) != len(self._expect):
            self._explain_names(feed)
        arrays = []
        for name, dtype, shape in self._expect:
            try:
                value = feed[name]
            except KeyError:   # a missing name (the counts matched: so an unknown one too)
                self._explain_names(feed)
            # The common case (a dense ndarray of the right dtype and shape)
            # costs three attribute checks; anything else takes the full path.
            if (type(value) is not np.ndarray or value.dtype != dtype or value.shape != shape
                    or not value.flags.c_contiguous):
                value = self._check_input(self.input_specs[len(arrays)], value)
            arrays.append(value)
        for position, udtype, rows, label in self._index_fast:
            idx = arrays[position]
            if idx.size and (_max(idx.view(udtype), axis=None) >= rows if udtype is not None
                             else int(idx.min()) < 0 or int(idx.max()) >= rows):
                raise InputError(f"input '{self.input_specs[position].name}': index out of range [0, {rows}) "
                                 f"for {label} (min {int(idx.min())}, max {int(idx.max())})")
        outputs = [np.empty(shape, dtype) for shape, dtype in self._out_alloc]
        self.program.run(arrays, outputs)
        return dict(zip(self._out_names, outputs))

    __call__ = run

    def _feed(self, inputs: object) -> dict:
        """A fresh dict of the inputs given positionally (a mapping or (name, value) pairs)."""
        try:
            return as_bindings(inputs, InputError, "inputs")
        except InputError as exc:
            raise InputError(f"{exc}; the graph takes {', '.join(str(s) for s in self.input_specs)}") from None

    def _explain_names(self, feed: Mapping[str, object]) -> None:
        expected = [s.name for s in self.input_specs]
        unknown = sorted(set(feed) - self._input_names, key=repr)   # keys may be of mixed types
        missing = [n for n in expected if n not in feed]
        parts = []
        if unknown:
            parts.append(f"unknown input(s) {unknown}")
        if missing:
            parts.append(f"missing input(s) {missing}")
        raise InputError("; ".join(parts) + f"; the graph takes {', '.join(str(s) for s in self.input_specs)}")

    @staticmethod
    def _check_input(spec: IOSpec, value) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            value = convert_values(value, spec, InputError, "input")
        if value.dtype != spec.dtype.numpy:
            raise InputError(f"input '{spec.name}': dtype {value.dtype}, expected {spec.dtype.name} "
                             f"({spec.dtype.numpy}); convert it with .astype(np.{spec.dtype.numpy})")
        if value.shape != spec.shape:
            raise InputError(f"input '{spec.name}': shape {value.shape}, expected {spec.shape}")
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        return value

    def __repr__(self) -> str:
        ins = ", ".join(str(s) for s in self.input_specs)
        outs = ", ".join(str(s) for s in self.output_specs)
        s = self.stats
        return (f"<Executable on {self.target.backend}: ({ins}) -> ({outs}); {s.thunks} thunks, "
                f"{s.barriers} barriers, arena {s.arena_bytes} B>")


def _quantized_param(spec: IOSpec, value) -> np.ndarray:
    """A block-format param's raw bytes: a uint8 array of the storage shape
    (rows of whole blocks) or the same bytes flat, or a GGUF tensor
    (rlx.gguf: its type must be the declared format)."""
    kind = getattr(value, "type", None)
    if kind is not None and hasattr(value, "data"):   # an rlx.gguf tensor
        if str(kind).lower() != spec.dtype.name:
            raise ParameterError(f"parameter '{spec.name}': a GGUF {kind} tensor, expected {spec.dtype.name}")
        if tuple(getattr(value, "shape", spec.shape)) != tuple(spec.shape):
            raise ParameterError(f"parameter '{spec.name}': GGUF shape {tuple(value.shape)}, expected {spec.shape}")
        value = value.data
    array = np.asarray(value)
    want = spec.dtype.storage_shape(spec.shape)
    if array.dtype != np.uint8:
        raise ParameterError(f"parameter '{spec.name}': {spec.dtype.name} weights are given as their raw blocks "
                             f"(uint8{list(want)}), got {array.dtype}{list(array.shape)}")
    if array.shape != want and not (array.ndim == 1 and array.size == spec.nbytes):
        raise ParameterError(f"parameter '{spec.name}': {array.size} bytes in shape {array.shape}, expected "
                             f"uint8{list(want)} (shape {spec.shape} in {spec.dtype.name})")
    return np.ascontiguousarray(array).reshape(want)


def unwrap_file_tensor(value, dtype: DType):
    """A plain rlx.gguf tensor as a view of the memory map (a GGUF BF16
    tensor for a bf16 param: its raw bf16 bits); any other value as it is."""
    if dtype is bf16 and (hasattr(value, "data") and getattr(value, "type", None) == "BF16"):
        return value.data.view(np.uint16).reshape(value.shape)
    if getattr(value, "type", None) in ("F32", "F16", "I32", "I64") and hasattr(value, "numpy"):
        return value.numpy()
    return value


def drop_file_pages(value) -> None:
    """After a param's value was written to its device buffer: a tensor of a
    memory-mapped file (rlx.gguf) lets its pages go from resident memory."""
    drop = getattr(value, "drop_cached_pages", None)
    if callable(drop):
        drop()


# Bytes of a file-backed param written (and its pages dropped) at a time.
PARAM_WRITE_CHUNK = 16 << 20


def write_param(buffer, offset: int, array: np.ndarray, source) -> None:
    """array (a param's coerced value) into buffer at offset. When array
    is source's own bytes (a memory-mapped rlx.gguf tensor, unconverted),
    it goes in PARAM_WRITE_CHUNK pieces, each piece's file pages dropped
    once written: a 170 MB embedding table is then never resident twice."""
    drop = getattr(source, "drop_cached_pages", None)
    flat = array.reshape(-1).view(np.uint8) if array.flags.c_contiguous else None
    if (not callable(drop) or flat is None or flat.nbytes != getattr(source, "nbytes", -1)
            or flat.ctypes.data != source.data.ctypes.data):   # converted: not the file's bytes
        buffer.write(offset, array)
        drop_file_pages(source)
        return
    for start in range(0, flat.nbytes, PARAM_WRITE_CHUNK):
        piece = flat[start:start + PARAM_WRITE_CHUNK]
        buffer.write(offset + start, piece)
        drop(start, piece.nbytes)


def coerce_param(spec: IOSpec, value) -> np.ndarray:
    """A parameter value as the declared dtype and shape. Floats convert
    between f32 and f16 (weights often ship in the other one) and round to
    bf16 for bf16 params; block formats take their raw bytes; anything else
    must match exactly."""
    if spec.dtype.quantized:
        return _quantized_param(spec, value)
    value = unwrap_file_tensor(value, spec.dtype)
    if spec.dtype.is_fp8 and isinstance(value, np.ndarray) and value.dtype == np.uint8:
        value = value.view(spec.dtype.numpy)   # FP8 codes as their raw bytes
    if spec.dtype is bf16 and isinstance(value, np.ndarray) and value.dtype in (np.uint8, np.uint16):
        bits = np.ascontiguousarray(value).view(np.uint16)   # raw bf16 bits (or their bytes), as stored
        if bits.size != int(np.prod(spec.shape, dtype=np.int64)):
            raise ParameterError(f"parameter '{spec.name}': {bits.size} bf16 values, expected shape {spec.shape}")
        return bits.reshape(spec.shape)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:   # ragged lists, ints beyond 64 bits, ...
        raise ParameterError(f"parameter '{spec.name}': cannot convert {type(value).__name__} to an array: "
                             f"{exc}") from None
    if array.shape != spec.shape:
        raise ParameterError(f"parameter '{spec.name}': shape {array.shape}, expected {spec.shape}")
    if spec.dtype is bf16:   # float values (precision="bf16"), rounded to bf16 bits here
        if not np.issubdtype(array.dtype, np.floating):
            raise ParameterError(f"parameter '{spec.name}': dtype {array.dtype}, expected float values "
                                 "(stored as bf16)")
        return to_bf16(array)
    if array.dtype != spec.dtype.numpy:
        # Floats convert between float dtypes; a c64 param takes complex128 (or real) values too.
        convertible = (np.issubdtype(array.dtype, np.floating) and (spec.dtype.is_float or spec.dtype.is_complex)
                       or np.issubdtype(array.dtype, np.complexfloating) and spec.dtype.is_complex)
        if not convertible:
            raise ParameterError(f"parameter '{spec.name}': dtype {array.dtype}, expected {spec.dtype.name}")
        array = array.astype(spec.dtype.numpy)
    return np.ascontiguousarray(array)


def _kind_name(dtype: np.dtype) -> str:
    """What numpy made of a Python value, in words (for messages)."""
    if dtype.kind == "O":
        return "Python objects (None, mixed types, or integers beyond 64 bits)"
    return {"U": "strings", "S": "bytes", "b": "bools", "c": "complex numbers", "f": "floats",
            "M": "datetimes", "m": "timedeltas", "V": "raw records"}.get(dtype.kind, str(dtype))


def convert_values(value: object, spec: IOSpec, error: type[Exception], what: str) -> np.ndarray:
    """A non-ndarray value (a list, a scalar) as an array of ``spec``'s dtype,
    without changing any value: integer tensors take only integers that fit
    (a float is never truncated into an index, even an integral one, as a
    float ndarray is refused too), float tensors take ints and floats that
    stay finite. ``np.asarray`` learns what the values are first; converting
    straight to the target dtype would truncate 1.5 to 1."""
    label = f"{what} '{spec.name}'"
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:   # ragged lists, odd objects
        raise error(f"{label}: cannot convert {type(value).__name__} to {spec.dtype.name}: {exc}") from None
    kind = array.dtype.kind
    accepted = "fiuc" if spec.dtype.is_complex else "fiu" if spec.dtype.is_float else "iu"
    if kind not in accepted:
        wanted = "numbers" if spec.dtype.is_float or spec.dtype.is_complex else "integers"
        raise error(f"{label}: cannot convert {type(value).__name__} to {spec.dtype.name}: it holds "
                    f"{_kind_name(array.dtype)}, expected {wanted}")
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(spec.dtype.numpy)
    if spec.dtype.is_float or spec.dtype.is_complex:
        changed = not np.isfinite(converted).all() and np.isfinite(array).all()
    else:
        changed = not np.array_equal(converted, array)
    if changed:
        raise error(f"{label}: cannot convert {type(value).__name__} to {spec.dtype.name}: values out of range "
                    f"(min {array.min()}, max {array.max()})")
    return converted
