# cython: language_level=3, boundscheck=False, wraparound=False
"""The run loop: copies inputs in, patches dynamic params, encodes the packed
thunk table or executes its schedule (made once by the shim) through the
shim's function table, waits, and copies outputs out, all without the GIL.

Planning happens in Python (rlx/runtime). Its thunks are packed once into a
ThunkTable (typed appends, checked in _core_tables.pxi before anything reaches C) whose
buffers are named by a Bindings table; a Program is created from the table
and the buffers each binding name stands for, and from then on touches only
C memory. The Program's encoder is also the one per-thunk timing uses
(run_one, encode_one, record_one: calibration probes and profiling).
"""

import operator
from numbers import Real

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.math cimport INFINITY
from libc.string cimport memcpy, memset, strncpy

from rlx import errors as _errors


cdef extern from *:
    """
    #define rlx_shim_has_schedules(api) RLX_SHIM_HAS(api, schedule_free)
    """
    bint rlx_shim_has_schedules(const rlx_shim_api *api) nogil

cdef extern from "<pthread.h>" nogil:
    int pthread_mutex_init(pthread_mutex_t *m, const void *attr)
    int pthread_mutex_destroy(pthread_mutex_t *m)
    int pthread_mutex_lock(pthread_mutex_t *m)
    int pthread_mutex_unlock(pthread_mutex_t *m)

# rlx_status values (csrc/rlx_shim.h) mapped to the error raised in Python.
_STATUS_ERRORS = {
    1: _errors.RlxError,
    2: _errors.DeviceError,
    3: _errors.KernelCompileError,
    4: _errors.UnsupportedOpError,
    5: _errors.DeviceError,
    6: _errors.UnsupportedOpError,
    7: _errors.DeviceUnavailableError,
}

cdef enum:
    MAX_IO = 256
    IO_ALIGN = 16                    # an array read / written in place starts on this many bytes
    MAX_BUFFERS = 16                 # entries of one binding table
    RLX_ERR_UNSUPPORTED_STATUS = 6   # rlx_status RLX_ERR_UNSUPPORTED

# Launch exploration (Program explore_launch): runs not timed first (the
# first run of a schedule pays one-time work), then runs timed for each
# form, alternating; the serial form stays only if faster by this fraction.
cdef enum:
    LAUNCH_WARMUP_RUNS = 2
    LAUNCH_TRIALS_EACH = 8
cdef double LAUNCH_MARGIN = 0.02

THUNK_DISPATCH = 0
THUNK_GEMM = 1
# Segment kinds of rlx/opt/segments.py.
cdef enum:
    SEG_REPLAY = 0
    SEG_GEMM = 1
    SEG_DIRECT = 2
SEGMENT_REPLAY = SEG_REPLAY
SEGMENT_GEMM = SEG_GEMM
SEGMENT_DIRECT = SEG_DIRECT

# The binding names every executable has (rlx/runtime/views.py re-exports
# them): activations, inputs, outputs and kernel params live in the arena,
# weights and constants in the resident buffer.
ARENA = "arena"
RESIDENT = "resident"
# Element types as the shim ABI numbers them (rlx_dtype).
_GEMM_DTYPES = {0: "f32", 1: "f16", 2: "bf16", 3: "f8e4m3", 4: "f8e5m2"}
_U32_MAX = 0xFFFFFFFF
_I64_MAX = 0x7FFFFFFFFFFFFFFF


include "_core_tables.pxi"


cdef inline rlx_buffer *_optional_buffer(rlx_buffer **bufs, uint8_t binding) noexcept:
    """A gemm's optional buffer (bias, FP8 scales): NULL for RLX_THUNK_NO_BINDING."""
    return NULL if binding == RLX_THUNK_NO_BINDING else bufs[binding]


cdef inline int _encode_thunk(const rlx_shim_api *api, rlx_cmdbuf *cb, rlx_thunk *t,
                              uint32_t barrier) noexcept nogil:
    """The one encoder: thunk t into cb (after a barrier when asked)."""
    cdef uint32_t j
    cdef int st = 0
    if barrier:
        st |= api.cmd_barrier(cb)
    if t.kind == RLX_THUNK_DISPATCH:
        st |= api.cmd_set_pipeline(cb, t.pipeline)
        for j in range(t.n_bindings):
            if t.params != NULL and j == t.n_bindings - 1:   # the params struct, as bytes
                st |= api.cmd_set_bytes(cb, j, t.params, t.params_size)
            else:
                st |= api.cmd_set_buffer(cb, j, t.buffers[j], t.offsets[j])
        st |= api.cmd_dispatch(cb, t.groups, t.threads)
    else:
        st |= api.cmd_gemm(cb, &t.gemm)
    return st


cdef inline int _record_thunk(const rlx_shim_api *api, rlx_icb *icb, uint32_t index, rlx_thunk *t,
                              uint32_t barrier) noexcept nogil:
    """The dispatch t as entry ``index`` of an indirect command buffer."""
    return api.icb_encode_dispatch(icb, index, t.pipeline, t.n_bindings, t.buffers, t.offsets, t.groups,
                                   t.threads, barrier)


def direct_where_patched(segments, patched):
    """The segment plan with each dispatch in ``patched`` (its params change
    per run, and its kernel takes them by value) taken out of its replay
    segment as a direct one: replayed, it would carry its params as they
    were when recorded, so it is encoded every run."""
    if not patched:
        return segments
    out = []
    for kind, start, count in segments:
        if kind != SEGMENT_REPLAY:
            out.append((kind, start, count))
            continue
        run_start = start
        for i in range(start, start + count):
            if i in patched:
                if i > run_start:
                    out.append((SEGMENT_REPLAY, run_start, i - run_start))
                last = out[len(out) - 1] if out else None
                if last is not None and last[0] == SEGMENT_DIRECT and last[1] + last[2] == i:
                    out[len(out) - 1] = (SEGMENT_DIRECT, last[1], last[2] + 1)
                else:
                    out.append((SEGMENT_DIRECT, i, 1))
                run_start = i + 1
        if run_start < start + count:
            out.append((SEGMENT_REPLAY, run_start, start + count - run_start))
    return out


def _io(what, pairs, bindable=False):
    """(offset, integer) per entry; with bindable, an entry may add a third
    item, the binding name of the wrapped buffer it is read / written
    through (None: none), and the result has three items per entry."""
    if len(pairs) > MAX_IO:
        raise _errors.ScheduleError(f"at most {MAX_IO} {what}, got {len(pairs)}")
    out = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or not (len(pair) == 2 or bindable and len(pair) == 3):
            raise _errors.ScheduleError(f"{what} {i} must be an (arena offset, integer) pair"
                                        f"{' or (offset, size, binding name)' if bindable else ''}, got {pair!r}")
        entry = (_integer(f"{what} {i} offset", pair[0]), _integer(f"{what} {i} size", pair[1]))
        if bindable:
            entry += (pair[2] if len(pair) == 3 else None,)
        out.append(entry)
    return out


cdef class Program:
    """A compiled schedule bound to one device and its buffers.

    table: the ThunkTable (copied; bindings resolved here, once).
    buffers: shim buffer address per binding name of table.bindings (every
      name, "arena" among them).
    inputs / outputs: (arena offset, bytes) per transfer, or (arena offset,
      bytes, binding name): the name of a wrapped buffer (shim buffer_wrap,
      over those arena bytes) through which the thunks read that input or
      write that output; a run then points it at the caller's array instead
      of copying (bind_io), and back at the arena bytes afterwards.
    patches: (arena offset, dynamic symbol index) for run-time int32 params.
    replay: record the dispatches into an indirect command buffer once and
      replay it per run (segments: the plan of rlx/opt/segments.py, as
      (kind, start, count); None: one replay range per run of dispatches).
    """

    def __cinit__(self):
        pthread_mutex_init(&self.lock, NULL)

    def __init__(self, uintptr_t api, uintptr_t device, ThunkTable table not None, buffers, inputs, outputs,
                 patches=(), uint32_t n_dynamic=0, bint replay=True, segments=None, keepalive=None,
                 staged=None, bint explore_launch=False):
        cdef uint32_t i, j
        cdef rlx_thunk *t
        cdef rlx_buffer *bufs[MAX_BUFFERS]
        if ARENA not in table.bindings:
            raise _errors.ScheduleError(f"a Program's bindings need {ARENA!r} (inputs, outputs and patches live "
                                        f"there); the table binds {', '.join(table.bindings.names)}")
        for i, address in enumerate(table.bindings.resolve(buffers)):
            bufs[i] = <rlx_buffer *><uintptr_t>address
        inputs, outputs = _io("inputs", inputs, True), _io("outputs", outputs, True)
        patches = _io("patches", patches)
        self.api = <const rlx_shim_api *>api
        self.device = <rlx_device *>device
        self.keepalive = keepalive
        self.arena = bufs[table.bindings.index(ARENA)]
        self.arena_host = <char *>self.api.buffer_host_ptr(self.arena)
        # Separate device memory: inputs, patches and outputs travel inside the
        # command buffer (one synchronization per run) when the shim can.
        # staged=True forces that path (tests run it on the host shim), False never takes it.
        self.staged = (self.api.struct_size >= <uint32_t>sizeof(rlx_shim_api) and self.api.cmd_upload != NULL and
                       (self.arena_host == NULL if staged is None else bool(staged)))
        self.commit_wait = (self.api.struct_size >= <uint32_t>sizeof(rlx_shim_api) and
                            self.api.cmd_commit_wait != NULL)
        # A queue of its own where the shim has them: programs run from
        # different threads then overlap on the device (CUDA: a stream each).
        self.queue = NULL
        if self.api.struct_size >= <uint32_t>sizeof(rlx_shim_api) and self.api.queue_create != NULL:
            if self.api.queue_create(self.device, &self.queue) != 0:
                self.queue = NULL   # none here, or switched off: the device's queue

        # The table's thunks, copied, with every binding resolved to its buffer.
        self.n_thunks = table.n_thunks
        self.thunks = <rlx_thunk *>calloc(max(1, self.n_thunks), sizeof(rlx_thunk))
        if self.thunks == NULL:
            raise MemoryError()
        if self.n_thunks:
            memcpy(self.thunks, table.thunks, self.n_thunks * sizeof(rlx_thunk))
        # The dispatches' params bytes, a copy of the table's (patched per run).
        self.params_host = <uint8_t *>malloc(max(1, len(table.params_bytes)))
        if self.params_host == NULL:
            raise MemoryError()
        if len(table.params_bytes):
            memcpy(self.params_host, <const char *>table.params_bytes, len(table.params_bytes))
        for i in range(self.n_thunks):
            t = &self.thunks[i]
            if t.kind == RLX_THUNK_DISPATCH:
                for j in range(t.n_bindings):
                    t.buffers[j] = bufs[t.binding[j]]
                t.params = self.params_host + t.params_at if t.params_size else NULL
            else:
                t.gemm.a = bufs[t.gemm_binding[0]]
                t.gemm.b = bufs[t.gemm_binding[1]]
                t.gemm.c = bufs[t.gemm_binding[2]]
                t.gemm.bias = _optional_buffer(bufs, t.gemm_binding[3])
                t.gemm.a_scale = _optional_buffer(bufs, t.gemm_binding[4])
                t.gemm.b_scale = _optional_buffer(bufs, t.gemm_binding[5])

        can_rebind = (self.api.struct_size >= <uint32_t>sizeof(rlx_shim_api) and self.api.buffer_rebind != NULL
                      and self.arena_host != NULL)
        self.bind_io = True
        self.n_inputs = len(inputs)
        self.inputs = <rlx_io *>calloc(max(1, self.n_inputs), sizeof(rlx_io))
        self.n_outputs = len(outputs)
        self.outputs = <rlx_io *>calloc(max(1, self.n_outputs), sizeof(rlx_io))
        if self.inputs == NULL or self.outputs == NULL:
            raise MemoryError()
        for what, entries, ios in (("input", inputs, <uintptr_t>self.inputs),
                                   ("output", outputs, <uintptr_t>self.outputs)):
            for i, (off, size, name) in enumerate(entries):
                (<rlx_io *>ios)[i].offset = off
                (<rlx_io *>ios)[i].size = size
                if name is None:
                    continue
                if name not in table.bindings:
                    raise _errors.ScheduleError(f"{what} {i} is bound through {name!r}, which is not a binding of "
                                                f"the table ({', '.join(table.bindings.names)})")
                if not can_rebind:
                    raise _errors.ScheduleError(f"{what} {i} is bound through {name!r}, but this shim cannot "
                                                f"rebind buffers (buffer_rebind) or its arena is not host-visible")
                (<rlx_io *>ios)[i].bound = bufs[table.bindings.index(name)]
        self.n_patches = len(patches)
        self.patches = <rlx_patch *>calloc(max(1, self.n_patches), sizeof(rlx_patch))
        for i, (off, sym) in enumerate(patches):
            if sym >= n_dynamic:
                raise _errors.ScheduleError(f"patch {i} names dynamic value {sym} of {n_dynamic}")
            self.patches[i].offset = off
            self.patches[i].symbol = sym
        patched = self._find_params_patches(table.bindings.index(ARENA))
        self.n_dynamic = n_dynamic
        self.dynamic = <int64_t *>calloc(max(1, n_dynamic), sizeof(int64_t))
        # explore_launch: each schedule also in its serial form, the faster
        # one kept after the first runs (launch_mode; RLX_CUDA_PDL=auto).
        self.explore_launch = explore_launch
        self.launch_choice = 0
        self.launch_best[0] = self.launch_best[1] = INFINITY
        if replay:
            if segments is None:   # one replay range per run of dispatches, gemms between
                segments = []
                for i in range(self.n_thunks):
                    kind = SEGMENT_GEMM if self.thunks[i].kind == RLX_THUNK_GEMM else SEGMENT_REPLAY
                    last = len(segments) - 1
                    if last >= 0 and kind == SEGMENT_REPLAY and segments[last][0] == SEGMENT_REPLAY:
                        segments[last] = (kind, segments[last][1], segments[last][2] + 1)
                    else:
                        segments.append((kind, i, 1))
            self._record(direct_where_patched(segments, patched))

    cdef _find_params_patches(self, uint32_t arena):
        """The params bytes each patch hits (a dispatch whose declared params
        are bound in the arena over the patched word): they are patched with
        the arena, so a directly encoded dispatch passes the run's values.
        Returns the indices of those whose pipeline takes the params by
        value (a recorded one would keep its recorded bytes)."""
        cdef uint32_t i, k, last
        cdef rlx_thunk *t
        hits = []
        for i in range(self.n_thunks):
            t = &self.thunks[i]
            if t.kind != RLX_THUNK_DISPATCH or not t.params_size:
                continue
            last = t.n_bindings - 1
            if t.binding[last] != arena:
                continue
            for k in range(self.n_patches):
                if t.offsets[last] <= self.patches[k].offset and \
                        self.patches[k].offset + 4 <= t.offsets[last] + t.params_size:
                    hits.append((i, t.params_at + self.patches[k].offset - t.offsets[last], self.patches[k].symbol))
        self.params_patches = <rlx_patch *>calloc(max(1, len(hits)), sizeof(rlx_patch))
        if self.params_patches == NULL:
            raise MemoryError()
        for k, (i, at, sym) in enumerate(hits):
            self.params_patches[k].offset = at
            self.params_patches[k].symbol = sym
        self.n_params_patches = len(hits)
        return frozenset(i for i, _, _ in hits if self.thunks[i].params_by_value)

    cdef void _patch_params_host(self) noexcept nogil:
        """This run's dynamic values into the params bytes the patches hit."""
        cdef uint32_t i
        cdef int32_t value
        for i in range(self.n_params_patches):
            value = <int32_t>self.dynamic[self.params_patches[i].symbol]
            memcpy(self.params_host + self.params_patches[i].offset, &value, 4)

    cdef _record(self, segments):
        """Turn the segment plan into schedules, once: every run of replay and
        gemm segments becomes one shim schedule (cuda: one CUDA graph; Metal:
        ICB ranges around MPS gemms; host: a recorded list), and a direct
        segment stays a range encoded every run. A shim without schedules
        (an older table) encodes every run directly."""
        cdef uint32_t i, n = 0
        covered = 0
        for kind, start, count in segments:
            if kind not in (SEGMENT_REPLAY, SEGMENT_GEMM, SEGMENT_DIRECT) or start != covered or count < 1:
                raise _errors.ScheduleError(f"bad segment plan at ({kind}, {start}, {count}): segments must "
                                            f"cover the thunks in order")
            if kind == SEGMENT_GEMM and (count != 1 or self.thunks[start].kind != RLX_THUNK_GEMM):
                raise _errors.ScheduleError(f"segment at {start}: a gemm segment is one gemm thunk")
            if kind == SEGMENT_REPLAY:
                for i in range(start, start + count):
                    if self.thunks[i].kind != RLX_THUNK_DISPATCH:
                        raise _errors.ScheduleError(f"segment at {start}: thunk {i} is not a dispatch")
            n += 1
            covered = start + count
        if covered != self.n_thunks:
            raise _errors.ScheduleError(f"segment plan covers {covered} of {self.n_thunks} thunks")
        self.n_segments = n
        if not rlx_shim_has_schedules(self.api):
            return
        self.steps = <rlx_step *>calloc(max(1, n), sizeof(rlx_step))
        if self.steps == NULL:
            raise MemoryError()
        pending = None   # (start, count) of the replay and gemm segments not yet in a schedule
        for kind, start, count in segments:
            if kind != SEGMENT_DIRECT:
                pending = (pending[0], start + count - pending[0]) if pending is not None else (start, count)
                continue
            if pending is not None:
                self._add_schedule(pending[0], pending[1])
                pending = None
            self.steps[self.n_steps].start = start
            self.steps[self.n_steps].count = count
            self.n_steps += 1
        if pending is not None:
            self._add_schedule(pending[0], pending[1])
        self.replay = True
        for i in range(self.n_steps):
            if self.steps[i].serial != NULL:
                self.launch_choice = -1   # a serial form to time against the schedule
                break

    cdef _add_schedule(self, uint32_t start, uint32_t count):
        """One schedule of thunks [start, start+count) as the next step."""
        cdef rlx_schedule_desc desc
        cdef rlx_schedule_cmd *cmds = <rlx_schedule_cmd *>calloc(count, sizeof(rlx_schedule_cmd))
        cdef rlx_schedule_cmd *c
        cdef rlx_thunk *t
        cdef uint32_t i
        cdef int status
        if cmds == NULL:
            raise MemoryError()
        for i in range(count):
            t = &self.thunks[start + i]
            c = &cmds[i]
            c.op = RLX_SCHEDULE_GEMM if t.kind == RLX_THUNK_GEMM else RLX_SCHEDULE_DISPATCH
            c.barrier_before = t.barrier_before
            c.pipeline = t.pipeline
            c.n_bindings = t.n_bindings
            memcpy(c.groups, t.groups, sizeof(t.groups))
            memcpy(c.threads, t.threads, sizeof(t.threads))
            memcpy(c.buffers, t.buffers, sizeof(t.buffers))
            memcpy(c.offsets, t.offsets, sizeof(t.offsets))
            c.gemm = t.gemm
        desc.n_commands = count
        desc.flags = 0
        desc.commands = cmds
        status = self.api.schedule_create(self.device, &desc, &self.steps[self.n_steps].schedule)
        self.steps[self.n_steps].serial = NULL
        if status == 0 and self.explore_launch:
            desc.flags = RLX_SCHEDULE_SERIAL
            if self.api.schedule_create(self.device, &desc, &self.steps[self.n_steps].serial) != 0:
                self.steps[self.n_steps].serial = NULL   # then this step is not explored; the schedule serves
        free(cmds)
        if status != 0:
            self._raise(status, f"making the schedule of thunks [{start}, {start + count})")
        self.steps[self.n_steps].start = start
        self.steps[self.n_steps].count = count
        self.n_steps += 1

    def __dealloc__(self):
        cdef uint32_t i
        if self.steps != NULL and self.api != NULL:
            for i in range(self.n_steps):
                if self.steps[i].schedule != NULL:
                    self.api.schedule_free(self.steps[i].schedule)
                if self.steps[i].serial != NULL:
                    self.api.schedule_free(self.steps[i].serial)
        if self.queue != NULL and self.api != NULL:
            self.api.queue_free(self.queue)
        free(self.thunks)
        free(self.inputs)
        free(self.outputs)
        free(self.patches)
        free(self.params_patches)
        free(self.params_host)
        free(self.dynamic)
        free(self.steps)
        pthread_mutex_destroy(&self.lock)

    cdef _raise(self, int status, what):
        cdef const char *msg = self.api.last_error()
        text = msg.decode("utf-8", "replace") if msg != NULL else ""
        raise _STATUS_ERRORS.get(status, _errors.DeviceError)(f"{what}: {text}")

    @property
    def replaying(self):
        """True when runs replay the recorded schedule instead of re-encoding."""
        return bool(self.replay)

    @property
    def thunk_count(self):
        return self.n_thunks

    def counters(self):
        """What this program's runs did so far: thunks encoded one at a time
        (outside recorded schedules), schedule executions and dynamic-value
        patches written. A replayed executable encodes nothing per run."""
        return {"thunks_encoded": self.n_thunks_encoded, "schedules_run": self.n_schedules_run,
                "patches_written": self.n_patches_written}

    @property
    def segment_count(self):
        return self.n_segments

    @property
    def own_queue(self):
        """True when the program runs on a queue of its own (the shim has
        queues and they are on), False on the device's queue."""
        return self.queue != NULL

    @property
    def staged_copies(self):
        """True when inputs and outputs are copied inside the command buffer."""
        return bool(self.staged)

    @staged_copies.setter
    def staged_copies(self, bint value):
        """False copies inputs and outputs outside the command buffer from the
        next run on (benchmarks compare the two); True only where the shim has
        the copies."""
        if value and not (self.api.struct_size >= <uint32_t>sizeof(rlx_shim_api) and self.api.cmd_upload != NULL):
            raise _errors.RlxError("this device's shim cannot copy inside a command buffer")
        pthread_mutex_lock(&self.lock)
        self.staged = value
        pthread_mutex_unlock(&self.lock)

    @property
    def binds_io(self):
        """True when runs read inputs and write outputs that have a bound
        buffer in the caller's arrays (no copy), False when every input and
        output is copied through the arena. Settable: profiling that runs
        thunks one at a time afterwards (run_one) wants the inputs copied
        into their arena bytes."""
        return bool(self.bind_io)

    @binds_io.setter
    def binds_io(self, bint value):
        pthread_mutex_lock(&self.lock)
        self.bind_io = value
        pthread_mutex_unlock(&self.lock)

    @property
    def bound_io(self):
        """(inputs, outputs): the indices that have a bound buffer."""
        return ([i for i in range(self.n_inputs) if self.inputs[i].bound != NULL],
                [i for i in range(self.n_outputs) if self.outputs[i].bound != NULL])

    @property
    def last_device_seconds(self):
        """Device time of the latest run, as the shim measured it."""
        return self.device_seconds

    def set_dynamic(self, uint32_t symbol, int64_t value):
        if symbol >= self.n_dynamic:
            raise _errors.RlxError(f"dynamic value {symbol} out of range ({self.n_dynamic})")
        program_set_dynamic(self, symbol, value)

    def _thunk(self, i):
        """i as a thunk index of this program, else ScheduleError."""
        index = _integer("thunk index", i)
        if index >= self.n_thunks:
            raise _errors.ScheduleError(f"thunk {index}: this program has {self.n_thunks} thunks")
        return index

    def _target(self, what, uintptr_t address, i, barrier):
        """(thunk index, barrier flag) for encode_one / record_one: the
        thunk's own flag when barrier is None."""
        if address == 0:
            raise _errors.ScheduleError(f"{what} address is 0")
        index = self._thunk(i)
        return index, (self.thunks[<uint32_t>index].barrier_before if barrier is None else _flag("barrier", barrier))

    def run_one(self, i):
        """Run thunk ``i`` alone (no copies, no patches): one command buffer
        holding just it, committed and waited for, as the run loop encodes
        it. Returns the device seconds (also in last_device_seconds).
        Profiling times thunks one by one with this."""
        cdef uint32_t index = self._thunk(i)
        cdef rlx_cmdbuf *cb = NULL
        cdef int status
        with nogil:
            pthread_mutex_lock(&self.lock)
            status = self._begin(&cb)
            if status != 0:
                status = self._fail(status, b"beginning a command buffer")
            else:
                status = _encode_thunk(self.api, cb, &self.thunks[index], 0)
                status = self._fail(status, b"encoding") if status != 0 else _submit(self, cb)
                self.api.cmd_release(cb)
            pthread_mutex_unlock(&self.lock)
        if status != 0:
            raise _STATUS_ERRORS.get(status, _errors.DeviceError)(
                f"running thunk {index}: " + self.error.decode("utf-8", "replace"))
        return self.device_seconds

    def encode_one(self, uintptr_t cmdbuf, i, barrier=None):
        """Encode thunk ``i`` into the shim command buffer at address
        ``cmdbuf`` (``shim.CommandBuffer.address``) exactly as a run does;
        ``barrier`` None keeps the thunk's own barrier flag, True / False
        puts one before it or not. Calibration probes build their timed
        command lists with this."""
        cdef uint32_t index, before
        cdef int status
        index, before = self._target("encode_one: the command buffer", cmdbuf, i, barrier)
        with nogil:
            status = _encode_thunk(self.api, <rlx_cmdbuf *>cmdbuf, &self.thunks[index], before)
        if status != 0:
            self._raise(status, f"encoding thunk {index}")

    def record_one(self, uintptr_t icb, uint32_t entry, i, barrier=None):
        """Record the dispatch thunk ``i`` as entry ``entry`` of the shim
        indirect command buffer at address ``icb`` (``shim.Icb.address``),
        as the Program records its own replay ranges; ``barrier`` as for
        encode_one. Calibration replays such ICBs to time a dispatch."""
        cdef uint32_t index, before
        cdef int status
        index, before = self._target("record_one: the indirect command buffer", icb, i, barrier)
        if self.thunks[index].kind != RLX_THUNK_DISPATCH:
            raise _errors.ScheduleError(f"thunk {index} is a gemm: an indirect command buffer holds dispatches only")
        with nogil:
            status = _record_thunk(self.api, <rlx_icb *>icb, entry, &self.thunks[index], before)
        if status != 0:
            self._raise(status, f"recording thunk {index}")

    def run(self, inputs, outputs):
        """Run once. inputs / outputs: objects with the buffer protocol, dense,
        in the order and byte sizes the program was built with. Bound ones
        (``bound_io``) are read / written in place during the call, so an
        input must not change until it returns."""
        cdef Py_buffer in_views[MAX_IO]
        cdef Py_buffer out_views[MAX_IO]
        cdef const void *in_ptrs[MAX_IO]
        cdef void *out_ptrs[MAX_IO]
        cdef uint32_t n_in = 0, n_out = 0, i
        cdef int status
        if len(inputs) != self.n_inputs or len(outputs) != self.n_outputs:
            raise _errors.InputError(
                f"expected {self.n_inputs} inputs and {self.n_outputs} outputs, "
                f"got {len(inputs)} and {len(outputs)}")
        try:
            for obj in inputs:
                PyObject_GetBuffer(obj, &in_views[n_in], PyBUF_ANY_CONTIGUOUS)
                n_in += 1
                if <uint64_t>in_views[n_in - 1].len != self.inputs[n_in - 1].size:
                    raise _errors.InputError(
                        f"input {n_in - 1}: {in_views[n_in - 1].len} bytes, expected {self.inputs[n_in - 1].size}")
                in_ptrs[n_in - 1] = in_views[n_in - 1].buf
            for obj in outputs:
                PyObject_GetBuffer(obj, &out_views[n_out], PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
                n_out += 1
                if <uint64_t>out_views[n_out - 1].len != self.outputs[n_out - 1].size:
                    raise _errors.InputError(
                        f"output {n_out - 1}: {out_views[n_out - 1].len} bytes, expected {self.outputs[n_out - 1].size}")
                out_ptrs[n_out - 1] = out_views[n_out - 1].buf
            with nogil:
                status = self.run_nogil(in_ptrs, out_ptrs)
        finally:
            for i in range(n_in):
                PyBuffer_Release(&in_views[i])
            for i in range(n_out):
                PyBuffer_Release(&out_views[i])
        if status != 0:
            raise _STATUS_ERRORS.get(status, _errors.DeviceError)(
                "run failed: " + self.error.decode("utf-8", "replace"))

    cdef int _fail(self, int status, const char *what) noexcept nogil:
        cdef const char *msg = self.api.last_error()
        cdef size_t n = 0
        memset(self.error, 0, sizeof(self.error))
        strncpy(self.error, what, 200)
        while self.error[n] != 0:
            n += 1
        if msg != NULL:
            self.error[n] = b':'
            self.error[n + 1] = b' '
            strncpy(self.error + n + 2, msg, sizeof(self.error) - n - 3)
        return status

    cdef int _encode_range(self, rlx_cmdbuf *cb, uint32_t start, uint32_t end) noexcept nogil:
        """Encode thunks [start, end) one by one."""
        cdef const rlx_shim_api *api = self.api
        cdef rlx_thunk *t = self.thunks + start
        cdef uint32_t i
        cdef int st = 0
        for i in range(start, end):
            st |= _encode_thunk(api, cb, t, t.barrier_before)
            t += 1
        self.n_thunks_encoded += end - start
        return st

    cdef int _encode(self, rlx_cmdbuf *cb) noexcept nogil:
        """Replaying: each step, usually one schedule (one shim call)."""
        cdef uint32_t i
        cdef int st = 0
        cdef rlx_step *step
        if not self.replay:
            return self._encode_range(cb, 0, self.n_thunks)
        for i in range(self.n_steps):
            step = &self.steps[i]
            if step.schedule != NULL:
                st |= self.api.cmd_execute_schedule(
                    cb, step.serial if self.run_serial and step.serial != NULL else step.schedule)
                self.n_schedules_run += 1
            else:
                st |= self._encode_range(cb, step.start, step.start + step.count)
        return st

    cdef int run_nogil(self, const void *const *inputs, void *const *outputs) noexcept nogil:
        cdef int status
        pthread_mutex_lock(&self.lock)
        # The serial forms: once chosen, or every other timed run while exploring.
        self.run_serial = self.launch_choice == 1 or (
            self.launch_choice == -1 and self.launch_trials >= LAUNCH_WARMUP_RUNS and self.launch_trials % 2 == 1)
        self._bind_io(inputs, outputs)
        self._patch_params_host()
        if self.staged:
            status = self._run_staged(inputs, outputs)
            if status == RLX_ERR_UNSUPPORTED_STATUS:   # the shim prefers direct copies after all
                self.staged = 0
        if not self.staged:
            status = self._run_direct(inputs, outputs)
        if status == 0 and self.launch_choice == -1:
            self._launch_observe()
        self._unbind_io()
        pthread_mutex_unlock(&self.lock)
        return status

    cdef void _launch_observe(self) noexcept nogil:
        """One explored run's device time into its form's best; after the
        last trial the serial forms stay only if they were faster by
        LAUNCH_MARGIN (a shim that times nothing keeps the schedules). The
        caller holds the lock."""
        cdef uint32_t t = self.launch_trials
        cdef int form = 1 if self.run_serial else 0
        self.launch_trials += 1
        if t >= LAUNCH_WARMUP_RUNS and self.device_seconds > 0 and self.device_seconds < self.launch_best[form]:
            self.launch_best[form] = self.device_seconds
        if self.launch_trials >= LAUNCH_WARMUP_RUNS + 2 * LAUNCH_TRIALS_EACH:
            self.launch_choice = 1 if self.launch_best[1] < self.launch_best[0] * (1.0 - LAUNCH_MARGIN) else 0
            self._drop_unchosen_schedules()

    cdef void _drop_unchosen_schedules(self) noexcept nogil:
        """Frees each step's form that lost, so only the chosen one stays
        instantiated (on cuda, a second CUDA graph of the same kernels).
        With both kept, auto's serial decode step on the H200 paid ~50 us
        more host time than RLX_CUDA_PDL=0's; with the loser freed, it ran
        within the run-to-run spread (benchmarks/README.md, session 26).
        Every run before has completed. The caller holds the lock."""
        cdef uint32_t i
        cdef rlx_step *step
        for i in range(self.n_steps):
            step = &self.steps[i]
            if step.serial == NULL:
                continue
            if self.launch_choice == 1:   # the serial form serves from now on, as the step's schedule
                self.api.schedule_free(step.schedule)
                step.schedule = step.serial
            else:
                self.api.schedule_free(step.serial)
            step.serial = NULL

    @property
    def launch_mode(self):
        """How this program's schedules launch: "overlapped" (as the shim
        launches them: on cuda with PDL), "serial" (each kernel after its
        predecessor has finished: RLX_SCHEDULE_SERIAL, chosen because it
        timed faster), or "exploring" (the first runs, alternating both)."""
        return {-1: "exploring", 0: "overlapped", 1: "serial"}[self.launch_choice]

    def pin_launch_mode(self, mode: str) -> None:
        """Ends the exploration with ``mode`` ("overlapped" or "serial",
        say from an earlier process's launch_mode) and frees the other
        form. Only while exploring: a program that never explored has one
        form, and one that has chosen keeps its choice."""
        if mode not in ("overlapped", "serial"):
            raise _errors.ConfigError(f"pin_launch_mode: mode must be 'overlapped' or 'serial', got {mode!r}")
        pthread_mutex_lock(&self.lock)
        try:
            if self.launch_choice != -1:
                raise _errors.ConfigError(f"pin_launch_mode: the launch mode is already {self.launch_mode!r} "
                                          f"(pinning applies while a program explores: RLX_CUDA_PDL=auto on CUDA)")
            self.launch_choice = 1 if mode == "serial" else 0
            self._drop_unchosen_schedules()
        finally:
            pthread_mutex_unlock(&self.lock)

    @property
    def launch_forms(self):
        """Schedule forms held: each replayed step's schedule, plus its
        serial form while exploring (the losing form is freed once chosen)."""
        cdef uint32_t i
        cdef int n = 0
        for i in range(self.n_steps):
            n += (self.steps[i].schedule != NULL) + (self.steps[i].serial != NULL)
        return n

    @property
    def launch_times(self):
        """While exploring and after: each form's fastest device seconds
        (inf where none was timed)."""
        return {"overlapped": self.launch_best[0], "serial": self.launch_best[1], "trials": self.launch_trials}

    cdef void _bind_io(self, const void *const *inputs, void *const *outputs) noexcept nogil:
        """Points the bound buffers at the caller's arrays where they allow it
        (IO_ALIGN-aligned; an output must not overlap an input read in place,
        which its kernels would overwrite while still reading it); every other
        value is copied as before. The caller holds the lock."""
        cdef uint32_t i, j
        cdef rlx_io *io
        cdef uintptr_t lo, hi
        cdef bint clash
        if not self.bind_io:
            return
        for i in range(self.n_inputs):
            io = &self.inputs[i]
            if (io.bound != NULL and io.size and (<uintptr_t>inputs[i]) % IO_ALIGN == 0 and
                    self.api.buffer_rebind(io.bound, <void *>inputs[i]) == 0):
                io.in_place = 1
        for j in range(self.n_outputs):
            io = &self.outputs[j]
            if io.bound == NULL or not io.size or (<uintptr_t>outputs[j]) % IO_ALIGN != 0:
                continue
            lo, hi = <uintptr_t>outputs[j], <uintptr_t>outputs[j] + io.size
            clash = False
            for i in range(self.n_inputs):
                if (self.inputs[i].in_place and <uintptr_t>inputs[i] < hi and
                        lo < <uintptr_t>inputs[i] + self.inputs[i].size):
                    clash = True
            if not clash and self.api.buffer_rebind(io.bound, outputs[j]) == 0:
                io.in_place = 1

    cdef void _unbind_io(self) noexcept nogil:
        """Bound buffers back on their arena bytes: nothing keeps a pointer
        into the caller's arrays past the run (run_one, calibration)."""
        cdef uint32_t i
        for i in range(self.n_inputs):
            if self.inputs[i].in_place:
                self.api.buffer_rebind(self.inputs[i].bound, self.arena_host + self.inputs[i].offset)
                self.inputs[i].in_place = 0
        for i in range(self.n_outputs):
            if self.outputs[i].in_place:
                self.api.buffer_rebind(self.outputs[i].bound, self.arena_host + self.outputs[i].offset)
                self.outputs[i].in_place = 0

    cdef int _begin(self, rlx_cmdbuf **cb) noexcept nogil:
        if self.queue != NULL:
            return self.api.cmd_begin_on(self.queue, cb)
        return self.api.cmd_begin(self.device, cb)

    cdef int _execute(self, rlx_cmdbuf *cb) noexcept nogil:
        """Encode, commit and wait (cb is released by the caller)."""
        cdef int status = self._encode(cb)
        if status != 0:
            return self._fail(status, b"encoding")
        return _submit(self, cb)

    cdef int _run_staged(self, const void *const *inputs, void *const *outputs) noexcept nogil:
        """Copies in, the schedule and copies out as one command buffer."""
        cdef const rlx_shim_api *api = self.api
        cdef rlx_cmdbuf *cb = NULL
        cdef uint32_t i
        cdef int32_t value
        cdef int status = self._begin(&cb)
        if status != 0:
            return self._fail(status, b"beginning a command buffer")
        for i in range(self.n_inputs):
            if self.inputs[i].in_place:
                continue
            status = api.cmd_upload(cb, self.arena, self.inputs[i].offset, inputs[i], self.inputs[i].size)
            if status != 0:
                break
        if status == 0:
            for i in range(self.n_patches):
                value = <int32_t>self.dynamic[self.patches[i].symbol]
                status = api.cmd_upload(cb, self.arena, self.patches[i].offset, &value, 4)
                self.n_patches_written += 1
                if status != 0:
                    break
        if status == 0:
            for i in range(self.n_outputs):
                if self.outputs[i].in_place:
                    continue
                status = api.cmd_download(cb, self.arena, self.outputs[i].offset, outputs[i], self.outputs[i].size)
                if status != 0:
                    break
        if status == RLX_ERR_UNSUPPORTED_STATUS:
            api.cmd_release(cb)
            return status
        if status != 0:
            status = self._fail(status, b"staging an input or output copy")
        else:
            status = self._execute(cb)
        api.cmd_release(cb)
        return status

    cdef int _run_direct(self, const void *const *inputs, void *const *outputs) noexcept nogil:
        """Inputs written, the schedule run, outputs read, one after another
        (plain memcpy when the arena is host-visible)."""
        cdef const rlx_shim_api *api = self.api
        cdef rlx_cmdbuf *cb = NULL
        cdef uint32_t i
        cdef int status = 0
        cdef int32_t value
        for i in range(self.n_inputs):
            if self.inputs[i].in_place:
                continue
            if self.arena_host != NULL:
                memcpy(self.arena_host + self.inputs[i].offset, inputs[i], self.inputs[i].size)
            else:
                status = api.buffer_write(self.arena, self.inputs[i].offset, inputs[i], self.inputs[i].size)
                if status != 0:
                    return self._fail(status, b"copying an input in")
        self.n_patches_written += self.n_patches
        for i in range(self.n_patches):
            value = <int32_t>self.dynamic[self.patches[i].symbol]
            if self.arena_host != NULL:
                memcpy(self.arena_host + self.patches[i].offset, &value, 4)
            else:
                status = api.buffer_write(self.arena, self.patches[i].offset, &value, 4)
                if status != 0:
                    return self._fail(status, b"patching a dynamic value")
        status = self._begin(&cb)
        if status != 0:
            return self._fail(status, b"beginning a command buffer")
        status = self._execute(cb)
        api.cmd_release(cb)
        if status != 0:
            return status
        for i in range(self.n_outputs):
            if self.outputs[i].in_place:
                continue
            if self.arena_host != NULL:
                memcpy(outputs[i], self.arena_host + self.outputs[i].offset, self.outputs[i].size)
            else:
                status = api.buffer_read(self.arena, self.outputs[i].offset, outputs[i], self.outputs[i].size)
                if status != 0:
                    return self._fail(status, b"copying an output out")
        return 0


cdef inline int _submit(Program prog, rlx_cmdbuf *cb) noexcept nogil:
    """Commit and wait; the device time lands in prog.device_seconds. One call
    where the shim has it: the host shim then runs the work on this thread."""
    cdef int status
    if prog.commit_wait:
        status = prog.api.cmd_commit_wait(cb, &prog.device_seconds)
        return prog._fail(status, b"executing") if status != 0 else 0
    status = prog.api.cmd_commit(cb)
    if status != 0:
        return prog._fail(status, b"committing")
    status = prog.api.cmd_wait(cb, &prog.device_seconds)
    if status != 0:
        return prog._fail(status, b"executing")
    return 0


cdef int program_run(Program prog, const void *const *inputs, void *const *outputs) noexcept nogil:
    return prog.run_nogil(inputs, outputs)


cdef int program_set_dynamic(Program prog, uint32_t symbol, int64_t value) noexcept nogil:
    if symbol >= prog.n_dynamic:
        return 1
    prog.dynamic[symbol] = value
    return 0


cdef const char *program_error(Program prog) noexcept nogil:
    return prog.error
