# cython: language_level=3, boundscheck=False, wraparound=False
"""The run loop: copies inputs in, patches dynamic params, encodes the packed
thunk table or executes its schedule (made once by the shim) through the
shim's function table, waits, and copies outputs out, all without the GIL.

Planning happens in Python (rlx/runtime); a Program is built once per
executable from plain tuples and from then on touches only C memory.
"""

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free
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
    RLX_ERR_UNSUPPORTED_STATUS = 6   # rlx_status RLX_ERR_UNSUPPORTED

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


cdef class Program:
    """A compiled schedule bound to one device, arena and set of buffers.

    thunks: sequence of tuples, either
      (0, barrier, pipeline_addr, ((slot, offset), ...), (gx, gy, gz), (tx, ty, tz))
      (1, barrier, (a_slot, a_off), (b_slot, b_off), (c_slot, c_off),
          m, n, k, lda, ldb, ldc, trans_a, trans_b, dtype, alpha, beta[, batch, stride_a, stride_b, stride_c
          [, outer, outer_stride_a, outer_stride_b, outer_stride_c, b_dtype, c_dtype[, (bias_slot, bias_off) or None]]])
    buffers: shim buffer addresses by slot; slot 0 is the arena.
    inputs / outputs: (arena offset, bytes) per transfer.
    patches: (arena offset, dynamic symbol index) for run-time int32 params.
    """

    def __cinit__(self):
        pthread_mutex_init(&self.lock, NULL)

    def __init__(self, uintptr_t api, uintptr_t device, buffers, thunks, inputs, outputs,
                 patches=(), uint32_t n_dynamic=0, bint replay=True, segments=None, keepalive=None,
                 staged=None):
        cdef uint32_t i, j
        cdef rlx_thunk *t
        cdef rlx_buffer *bufs[16]
        if len(buffers) == 0 or len(buffers) > 16:
            raise _errors.RlxError(f"Program needs 1..16 buffers, got {len(buffers)}")
        if len(inputs) > MAX_IO or len(outputs) > MAX_IO:
            raise _errors.RlxError(f"at most {MAX_IO} inputs and outputs")
        self.api = <const rlx_shim_api *>api
        self.device = <rlx_device *>device
        self.keepalive = keepalive
        for i, b in enumerate(buffers):
            bufs[i] = <rlx_buffer *><uintptr_t>b
        self.arena = bufs[0]
        self.arena_host = <char *>self.api.buffer_host_ptr(self.arena)
        # Separate device memory: inputs, patches and outputs travel inside the
        # command buffer (one synchronization per run) when the shim can.
        # staged=True forces that path (tests run it on the host shim), False never takes it.
        self.staged = (self.api.struct_size >= <uint32_t>sizeof(rlx_shim_api) and self.api.cmd_upload != NULL and
                       (self.arena_host == NULL if staged is None else bool(staged)))
        # A queue of its own where the shim has them: programs run from
        # different threads then overlap on the device (CUDA: a stream each).
        self.queue = NULL
        if self.api.struct_size >= <uint32_t>sizeof(rlx_shim_api) and self.api.queue_create != NULL:
            if self.api.queue_create(self.device, &self.queue) != 0:
                self.queue = NULL   # none here, or switched off: the device's queue

        self.n_thunks = len(thunks)
        self.thunks = <rlx_thunk *>calloc(max(1, self.n_thunks), sizeof(rlx_thunk))
        if self.thunks == NULL:
            raise MemoryError()
        for i, th in enumerate(thunks):
            t = &self.thunks[i]
            t.kind = th[0]
            t.barrier_before = 1 if th[1] else 0
            if t.kind == RLX_THUNK_DISPATCH:
                t.pipeline = <rlx_pipeline *><uintptr_t>th[2]
                if len(th[3]) > RLX_MAX_BINDINGS:
                    raise _errors.RlxError(f"thunk {i}: more than {RLX_MAX_BINDINGS} bindings")
                t.n_bindings = len(th[3])
                for j, (slot, off) in enumerate(th[3]):
                    t.buffers[j] = bufs[slot]
                    t.offsets[j] = off
                for j in range(3):
                    t.groups[j] = th[4][j]
                    t.threads[j] = th[5][j]
            elif t.kind == RLX_THUNK_GEMM:
                t.gemm.a = bufs[th[2][0]]
                t.gemm.a_offset = th[2][1]
                t.gemm.b = bufs[th[3][0]]
                t.gemm.b_offset = th[3][1]
                t.gemm.c = bufs[th[4][0]]
                t.gemm.c_offset = th[4][1]
                (t.gemm.m, t.gemm.n, t.gemm.k, t.gemm.lda, t.gemm.ldb, t.gemm.ldc,
                 t.gemm.trans_a, t.gemm.trans_b, t.gemm.dtype, t.gemm.alpha, t.gemm.beta) = th[5:16]
                # Optional tails: one level of batch, then the outer level and B's and C's dtypes.
                t.gemm.batch, t.gemm.stride_a, t.gemm.stride_b, t.gemm.stride_c = th[16:20] if len(th) > 16 \
                    else (1, 0, 0, 0)
                (t.gemm.outer, t.gemm.outer_stride_a, t.gemm.outer_stride_b, t.gemm.outer_stride_c,
                 t.gemm.b_dtype, t.gemm.c_dtype) = th[20:26] if len(th) > 20 else (1, 0, 0, 0, th[13], th[13])
                if len(th) > 26 and th[26] is not None:      # (slot, offset) of a bias added per column
                    t.gemm.bias = bufs[th[26][0]]
                    t.gemm.bias_offset = th[26][1]
            else:
                raise _errors.RlxError(f"thunk {i}: unknown kind {t.kind}")

        self.n_inputs = len(inputs)
        self.inputs = <rlx_io *>calloc(max(1, self.n_inputs), sizeof(rlx_io))
        for i, (off, size) in enumerate(inputs):
            self.inputs[i].offset = off
            self.inputs[i].size = size
        self.n_outputs = len(outputs)
        self.outputs = <rlx_io *>calloc(max(1, self.n_outputs), sizeof(rlx_io))
        for i, (off, size) in enumerate(outputs):
            self.outputs[i].offset = off
            self.outputs[i].size = size
        self.n_patches = len(patches)
        self.patches = <rlx_patch *>calloc(max(1, self.n_patches), sizeof(rlx_patch))
        for i, (off, sym) in enumerate(patches):
            if sym >= n_dynamic:
                raise _errors.RlxError(f"patch {i} names dynamic value {sym} of {n_dynamic}")
            self.patches[i].offset = off
            self.patches[i].symbol = sym
        self.n_dynamic = n_dynamic
        self.dynamic = <int64_t *>calloc(max(1, n_dynamic), sizeof(int64_t))
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
            self._record(segments)

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
                raise _errors.RlxError(f"bad segment plan at ({kind}, {start}, {count}): segments must cover "
                                       f"the thunks in order")
            if kind == SEGMENT_GEMM and (count != 1 or self.thunks[start].kind != RLX_THUNK_GEMM):
                raise _errors.RlxError(f"segment at {start}: a gemm segment is one gemm thunk")
            if kind == SEGMENT_REPLAY:
                for i in range(start, start + count):
                    if self.thunks[i].kind != RLX_THUNK_DISPATCH:
                        raise _errors.RlxError(f"segment at {start}: thunk {i} is not a dispatch")
            n += 1
            covered = start + count
        if covered != self.n_thunks:
            raise _errors.RlxError(f"segment plan covers {covered} of {self.n_thunks} thunks")
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
        if self.queue != NULL and self.api != NULL:
            self.api.queue_free(self.queue)
        free(self.thunks)
        free(self.inputs)
        free(self.outputs)
        free(self.patches)
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
    def last_device_seconds(self):
        """Device time of the latest run, as the shim measured it."""
        return self.device_seconds

    def set_dynamic(self, uint32_t symbol, int64_t value):
        if symbol >= self.n_dynamic:
            raise _errors.RlxError(f"dynamic value {symbol} out of range ({self.n_dynamic})")
        program_set_dynamic(self, symbol, value)

    def run(self, inputs, outputs):
        """Run once. inputs / outputs: objects with the buffer protocol, dense,
        in the order and byte sizes the program was built with."""
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
        cdef rlx_thunk *t
        cdef uint32_t i, j
        cdef int st = 0
        for i in range(start, end):
            t = &self.thunks[i]
            if t.barrier_before:
                st |= api.cmd_barrier(cb)
            if t.kind == RLX_THUNK_DISPATCH:
                st |= api.cmd_set_pipeline(cb, t.pipeline)
                for j in range(t.n_bindings):
                    st |= api.cmd_set_buffer(cb, j, t.buffers[j], t.offsets[j])
                st |= api.cmd_dispatch(cb, t.groups, t.threads)
            else:
                st |= api.cmd_gemm(cb, &t.gemm)
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
                st |= self.api.cmd_execute_schedule(cb, step.schedule)
            else:
                st |= self._encode_range(cb, step.start, step.start + step.count)
        return st

    cdef int run_nogil(self, const void *const *inputs, void *const *outputs) noexcept nogil:
        cdef int status
        pthread_mutex_lock(&self.lock)
        if self.staged:
            status = self._run_staged(inputs, outputs)
            if status == RLX_ERR_UNSUPPORTED_STATUS:   # the shim prefers direct copies after all
                self.staged = 0
        if not self.staged:
            status = self._run_direct(inputs, outputs)
        pthread_mutex_unlock(&self.lock)
        return status

    cdef int _begin(self, rlx_cmdbuf **cb) noexcept nogil:
        if self.queue != NULL:
            return self.api.cmd_begin_on(self.queue, cb)
        return self.api.cmd_begin(self.device, cb)

    cdef int _execute(self, rlx_cmdbuf *cb) noexcept nogil:
        """Encode, commit and wait (cb is released by the caller)."""
        cdef int status = self._encode(cb)
        if status != 0:
            return self._fail(status, b"encoding")
        status = self.api.cmd_commit(cb)
        if status != 0:
            return self._fail(status, b"committing")
        status = self.api.cmd_wait(cb, &self.device_seconds)
        if status != 0:
            return self._fail(status, b"executing")
        return 0

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
            status = api.cmd_upload(cb, self.arena, self.inputs[i].offset, inputs[i], self.inputs[i].size)
            if status != 0:
                break
        if status == 0:
            for i in range(self.n_patches):
                value = <int32_t>self.dynamic[self.patches[i].symbol]
                status = api.cmd_upload(cb, self.arena, self.patches[i].offset, &value, 4)
                if status != 0:
                    break
        if status == 0:
            for i in range(self.n_outputs):
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
            if self.arena_host != NULL:
                memcpy(self.arena_host + self.inputs[i].offset, inputs[i], self.inputs[i].size)
            else:
                status = api.buffer_write(self.arena, self.inputs[i].offset, inputs[i], self.inputs[i].size)
                if status != 0:
                    return self._fail(status, b"copying an input in")
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
            if self.arena_host != NULL:
                memcpy(outputs[i], self.arena_host + self.outputs[i].offset, self.outputs[i].size)
            else:
                status = api.buffer_read(self.arena, self.outputs[i].offset, outputs[i], self.outputs[i].size)
                if status != 0:
                    return self._fail(status, b"copying an output out")
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
