# Included by rlx/_core.pyx (one extension module; this file only keeps the
# table-building half apart from the run loop). The packed thunk table and the
# buffer names it refers to, with the argument checks every append makes
# before anything reaches C.


# The most bytes a params struct may have: cmd_set_bytes' limit (csrc/rlx_shim.h).
MAX_PARAMS_BYTES = 4096


def _integer(what, value, lo=0, hi=_I64_MAX):
    """value as a Python int in [lo, hi], else a ScheduleError naming it."""
    if isinstance(value, bool):
        raise _errors.ScheduleError(f"{what} must be an integer, got the bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise _errors.ScheduleError(f"{what} must be an integer, got {type(value).__name__} {value!r}") from None
    if v < lo:
        raise _errors.ScheduleError(f"{what} must be >= {lo}, got {v}")
    if v > hi:
        raise _errors.ScheduleError(f"{what} must be <= {hi}, got {v}")
    return v


def _flag(what, value):
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise _errors.ScheduleError(f"{what} must be a bool, got {type(value).__name__} {value!r}")


def _triple(what, value):
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise _errors.ScheduleError(f"{what} must be 3 integers (x, y, z), got {value!r}")
    return [_integer(f"{what}[{j}]", v, 1, _U32_MAX) for j, v in enumerate(value)]


def _real(what, value):
    if isinstance(value, bool) or not isinstance(value, Real):
        raise _errors.ScheduleError(f"{what} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def _gemm_dtype(what, value):
    return _integer(what, value, 0, max(_GEMM_DTYPES))


cdef class Bindings:
    """The named buffer table a ThunkTable's bindings refer to: "arena"
    (activations, inputs, outputs, kernel params), "resident" (weights and
    constants) and any further names (params shared from another executable,
    persistent state buffers). A thunk names an entry; a Program is given a
    shim buffer per name and resolves every binding once, when it is
    created (IREE binds buffers to a reusable command buffer the same way).

    Bindings(names=("arena", "resident")); add(name) declares one more."""

    def __init__(self, names=(ARENA, RESIDENT)):
        self.names = ()
        self._index = {}
        if isinstance(names, str):
            raise _errors.ScheduleError(f"Bindings takes a sequence of names, got the string {names!r}")
        for name in names:
            self.add(name)

    def add(self, name):
        """Declare the binding ``name``; returns its entry index."""
        if not isinstance(name, str) or not name:
            raise _errors.ScheduleError(f"a binding name is a non-empty string, got {name!r}")
        if name in self._index:
            raise _errors.ScheduleError(f"binding {name!r} is declared twice")
        if len(self.names) >= MAX_BUFFERS:
            raise _errors.ScheduleError(f"at most {MAX_BUFFERS} bindings; cannot add {name!r} to {self.names}")
        self._index[name] = len(self.names)
        self.names = self.names + (name,)
        return self._index[name]

    def index(self, name):
        """The entry of ``name``; ScheduleError for a name not declared."""
        i = self._index.get(name) if isinstance(name, str) else None
        if i is None:
            raise _errors.ScheduleError(f"unknown binding {name!r}: this table binds {', '.join(self.names)}")
        return i

    def resolve(self, buffers):
        """Shim buffer addresses in entry order, from a mapping name ->
        address that names every declared binding and nothing else."""
        if not hasattr(buffers, "keys"):
            raise _errors.ScheduleError(f"buffers must map binding names to shim buffer addresses, "
                                        f"got {type(buffers).__name__}")
        unknown = sorted(str(k) for k in buffers if k not in self._index)
        if unknown:
            raise _errors.ScheduleError(f"buffers for unknown binding(s) {unknown}: this table binds "
                                        f"{', '.join(self.names)}")
        missing = [n for n in self.names if n not in buffers]
        if missing:
            raise _errors.ScheduleError(f"no buffer for binding(s) {missing}")
        return [_integer(f"buffer of binding {n!r}", buffers[n], 1, <uintptr_t>-1) for n in self.names]

    def __len__(self):
        return len(self.names)

    def __contains__(self, name):
        return name in self._index

    def __iter__(self):
        return iter(self.names)

    def __repr__(self):
        return f"Bindings({self.names!r})"


cdef class ThunkTable:
    """A growable array of rlx_thunk (csrc/rlx_thunk.h): what lowering's
    thunks pack into, one typed append per thunk. Every argument is checked
    here (types, ranges, binding names) and a bad one raises ScheduleError
    before anything is written. Buffers are (binding name, byte offset)
    pairs over ``bindings`` (a Bindings, or its names)."""

    def __cinit__(self):
        self.thunks = NULL
        self.n_thunks = 0
        self.capacity = 0

    def __init__(self, bindings=None):
        self.bindings = bindings if isinstance(bindings, Bindings) else \
            Bindings() if bindings is None else Bindings(bindings)
        self.params_bytes = bytearray()

    def __dealloc__(self):
        free(self.thunks)

    def __len__(self):
        return self.n_thunks

    cdef rlx_thunk *_push(self) except NULL:
        """A zeroed entry at the end (the caller has checked its fields)."""
        cdef uint32_t cap
        cdef rlx_thunk *grown
        if self.n_thunks == self.capacity:
            cap = max(16, 2 * self.capacity)
            grown = <rlx_thunk *>realloc(self.thunks, cap * sizeof(rlx_thunk))
            if grown == NULL:
                raise MemoryError()
            self.thunks = grown
            self.capacity = cap
        memset(&self.thunks[self.n_thunks], 0, sizeof(rlx_thunk))
        self.n_thunks += 1
        return &self.thunks[self.n_thunks - 1]

    def _ref(self, what, ref):
        """(entry index, byte offset) of a (binding name, offset) pair."""
        if not isinstance(ref, (tuple, list)) or len(ref) != 2:
            raise _errors.ScheduleError(f"{what} must be a (binding name, byte offset) pair, got {ref!r}")
        try:
            index = self.bindings.index(ref[0])
        except _errors.ScheduleError as exc:
            raise _errors.ScheduleError(f"{what}: {exc}") from None
        return index, _integer(f"{what} offset", ref[1])

    def _optional_ref(self, what, ref):
        """_ref of an optional buffer (a gemm's bias or FP8 scale); None:
        (RLX_THUNK_NO_BINDING, 0)."""
        return (RLX_THUNK_NO_BINDING, 0) if ref is None else self._ref(what, ref)

    def append_dispatch(self, pipeline, bindings, groups, threads, barrier=False, params=None,
                        params_by_value=False):
        """A kernel dispatch: ``pipeline`` a shim pipeline address (int),
        ``bindings`` the kernel's buffers in binding order as (binding name,
        byte offset) pairs (at most RLX_MAX_BINDINGS), ``groups`` and
        ``threads`` per group 3 positive integers each, ``barrier`` True
        when it must wait for the thunks before it. ``params``: the bytes
        of its params struct (1 to 4096), which the last binding holds
        when the program runs: a directly encoded dispatch passes them as
        bytes (a CUDA kernel takes the struct by value). None: the last
        binding is bound as a buffer only. ``params_by_value``: the pipeline
        takes the params by value (Pipeline.takes_by_value of the last
        binding), so a recorded one keeps the bytes it was recorded with
        and the Program encodes it directly when a run patches them.
        Returns its index."""
        what = f"thunk {self.n_thunks} (dispatch)"
        address = _integer(f"{what}: pipeline (a shim pipeline address)", pipeline, 1, <uintptr_t>-1)
        if not isinstance(bindings, (tuple, list)):
            raise _errors.ScheduleError(f"{what}: bindings must be a list of (binding name, byte offset) pairs, "
                                        f"got {type(bindings).__name__}")
        if len(bindings) > RLX_MAX_BINDINGS:
            raise _errors.ScheduleError(f"{what}: {len(bindings)} bindings, at most {RLX_MAX_BINDINGS}")
        refs = [self._ref(f"{what}: binding {j}", ref) for j, ref in enumerate(bindings)]
        g = _triple(f"{what}: groups", groups)
        th = _triple(f"{what}: threads", threads)
        before = _flag(f"{what}: barrier", barrier)
        by_value = _flag(f"{what}: params_by_value", params_by_value)
        if by_value and params is None:
            raise _errors.ScheduleError(f"{what}: params_by_value needs the params bytes (params=)")
        if params is not None:
            if not isinstance(params, (bytes, bytearray, memoryview)):
                raise _errors.ScheduleError(f"{what}: params must be bytes (the params struct), got "
                                            f"{type(params).__name__}")
            params = bytes(params)
            if not 1 <= len(params) <= MAX_PARAMS_BYTES:
                raise _errors.ScheduleError(f"{what}: params must be 1 to {MAX_PARAMS_BYTES} bytes, got "
                                            f"{len(params)}")
            if not refs:
                raise _errors.ScheduleError(f"{what}: params are the last binding's bytes, and it has no bindings")
        cdef rlx_thunk *t = self._push()
        cdef uint32_t j
        if params is not None:
            self.params_bytes.extend(b"\0" * (-len(self.params_bytes) % 16))
            t.params_at = len(self.params_bytes)
            t.params_size = len(params)
            t.params_by_value = by_value
            self.params_bytes.extend(params)
        t.kind = RLX_THUNK_DISPATCH
        t.barrier_before = before
        t.pipeline = <rlx_pipeline *><uintptr_t>address
        t.n_bindings = len(refs)
        for j in range(t.n_bindings):
            t.binding[j] = refs[j][0]
            t.offsets[j] = refs[j][1]
        for j in range(3):
            t.groups[j] = g[j]
            t.threads[j] = th[j]
        return self.n_thunks - 1

    def append_gemm(self, *, a, b, c, m, n, k, lda, ldb, ldc, trans_a=False, trans_b=False, dtype=0,
                    alpha=1.0, beta=0.0, batch=1, stride_a=0, stride_b=0, stride_c=0, outer=1,
                    outer_stride_a=0, outer_stride_b=0, outer_stride_c=0, b_dtype=None, c_dtype=None,
                    bias=None, a_scale=None, b_scale=None, scale_mode=0, barrier=False):
        """A gemm (rlx_gemm_desc, csrc/rlx_shim.h): C = alpha * op(A) @ op(B)
        + beta * C. ``a``, ``b``, ``c`` and ``bias`` (None: none) are (binding
        name, byte offset) pairs; sizes, leading dimensions, batch counts and
        strides (elements) are integers >= 0; ``dtype``, ``b_dtype`` and
        ``c_dtype`` are rlx_dtype numbers (0 f32, 1 f16, 2 bf16, 3 f8e4m3, 4
        f8e5m2; B's and C's default to A's). ``a_scale`` / ``b_scale`` (None:
        1) are (binding name, byte offset) pairs: the scales of FP8 operands
        (rlx_gemm_desc), one f32 each at ``scale_mode`` 0, m and n f32 (one
        per row, one per column of C) at 1, the outer-vector form, which
        needs both. Returns its index."""
        what = f"thunk {self.n_thunks} (gemm)"
        ra, rb, rc = (self._ref(f"{what}: {name}", ref) for name, ref in (("a", a), ("b", b), ("c", c)))
        rbias, rsa, rsb = (self._optional_ref(f"{what}: {name}", ref)
                           for name, ref in (("bias", bias), ("a_scale", a_scale), ("b_scale", b_scale)))
        dims = [_integer(f"{what}: {name}", v) for name, v in (
            ("m", m), ("n", n), ("k", k), ("lda", lda), ("ldb", ldb), ("ldc", ldc), ("batch", batch),
            ("stride_a", stride_a), ("stride_b", stride_b), ("stride_c", stride_c), ("outer", outer),
            ("outer_stride_a", outer_stride_a), ("outer_stride_b", outer_stride_b),
            ("outer_stride_c", outer_stride_c))]
        ta, tb = _flag(f"{what}: trans_a", trans_a), _flag(f"{what}: trans_b", trans_b)
        da = _gemm_dtype(f"{what}: dtype", dtype)
        db = da if b_dtype is None else _gemm_dtype(f"{what}: b_dtype", b_dtype)
        dc = da if c_dtype is None else _gemm_dtype(f"{what}: c_dtype", c_dtype)
        fa, fb = _real(f"{what}: alpha", alpha), _real(f"{what}: beta", beta)
        before = _flag(f"{what}: barrier", barrier)
        mode = _integer(f"{what}: scale_mode (0 per tensor, 1 outer vectors)", scale_mode, 0, 1)
        if mode == 1 and (rsa[0] == RLX_THUNK_NO_BINDING or rsb[0] == RLX_THUNK_NO_BINDING):
            raise _errors.ScheduleError(f"{what}: outer-vector scales (scale_mode 1) need a_scale and b_scale")
        cdef rlx_thunk *t = self._push()
        t.kind = RLX_THUNK_GEMM
        t.barrier_before = before
        t.gemm_binding[0], t.gemm.a_offset = ra
        t.gemm_binding[1], t.gemm.b_offset = rb
        t.gemm_binding[2], t.gemm.c_offset = rc
        t.gemm_binding[3], t.gemm.bias_offset = rbias
        t.gemm_binding[4], t.gemm.a_scale_offset = rsa
        t.gemm_binding[5], t.gemm.b_scale_offset = rsb
        (t.gemm.m, t.gemm.n, t.gemm.k, t.gemm.lda, t.gemm.ldb, t.gemm.ldc, t.gemm.batch, t.gemm.stride_a,
         t.gemm.stride_b, t.gemm.stride_c, t.gemm.outer, t.gemm.outer_stride_a, t.gemm.outer_stride_b,
         t.gemm.outer_stride_c) = dims
        t.gemm.trans_a, t.gemm.trans_b = ta, tb
        t.gemm.dtype, t.gemm.b_dtype, t.gemm.c_dtype = da, db, dc
        t.gemm.alpha, t.gemm.beta = fa, fb
        t.gemm.scale_mode = mode
        return self.n_thunks - 1

    def entry(self, i):
        """Thunk ``i`` read back as a dict (binding names, not addresses)."""
        i = _integer("thunk index", i)
        if i >= self.n_thunks:
            raise _errors.ScheduleError(f"thunk index {i}: the table has {self.n_thunks} thunks")
        cdef rlx_thunk *t = &self.thunks[<uint32_t>i]
        names = self.bindings.names
        if t.kind == RLX_THUNK_DISPATCH:
            return {"kind": "dispatch", "barrier": bool(t.barrier_before), "pipeline": <uintptr_t>t.pipeline,
                    "bindings": [(names[t.binding[j]], t.offsets[j]) for j in range(t.n_bindings)],
                    "groups": tuple(t.groups[j] for j in range(3)),
                    "threads": tuple(t.threads[j] for j in range(3)),
                    "params": bytes(self.params_bytes[t.params_at:t.params_at + t.params_size])
                    if t.params_size else None,
                    "params_by_value": bool(t.params_by_value)}
        g = t.gemm

        def optional(binding, offset):   # a gemm's bias or FP8 scale: None where it has none
            return None if binding == RLX_THUNK_NO_BINDING else (names[binding], offset)

        return {"kind": "gemm", "barrier": bool(t.barrier_before),
                "a": (names[t.gemm_binding[0]], g.a_offset), "b": (names[t.gemm_binding[1]], g.b_offset),
                "c": (names[t.gemm_binding[2]], g.c_offset),
                "bias": optional(t.gemm_binding[3], g.bias_offset),
                "a_scale": optional(t.gemm_binding[4], g.a_scale_offset),
                "b_scale": optional(t.gemm_binding[5], g.b_scale_offset), "scale_mode": g.scale_mode,
                "m": g.m, "n": g.n, "k": g.k, "lda": g.lda, "ldb": g.ldb, "ldc": g.ldc,
                "trans_a": bool(g.trans_a), "trans_b": bool(g.trans_b), "dtype": g.dtype, "b_dtype": g.b_dtype,
                "c_dtype": g.c_dtype, "alpha": g.alpha, "beta": g.beta, "batch": g.batch,
                "stride_a": g.stride_a, "stride_b": g.stride_b, "stride_c": g.stride_c, "outer": g.outer,
                "outer_stride_a": g.outer_stride_a, "outer_stride_b": g.outer_stride_b,
                "outer_stride_c": g.outer_stride_c}
