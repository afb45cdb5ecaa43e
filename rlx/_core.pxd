# cython: language_level=3
"""C-level API of the rlx run loop.

Other Cython extensions can `cimport rlx._core` and run a compiled program
(`Executable.program`, or one made from a ThunkTable) without Python in
the loop:

    from rlx._core cimport Program, program_run
    with nogil:
        status = program_run(prog, input_ptrs, output_ptrs)

`input_ptrs[i]` / `output_ptrs[i]` point at dense host memory of the i-th
input / output in the order of `Executable.input_specs` / `output_specs`
(byte sizes there). Dynamic values are set with `program_set_dynamic`.
A non-zero status means the run failed; `program_error(prog)` gives the
message, and the program stays usable.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t


cdef extern from "rlx_shim.h" nogil:
    ctypedef struct rlx_device
    ctypedef struct rlx_buffer
    ctypedef struct rlx_pipeline
    ctypedef struct rlx_cmdbuf
    ctypedef struct rlx_icb
    ctypedef struct rlx_queue
    ctypedef struct rlx_schedule
    ctypedef struct rlx_library
    ctypedef struct rlx_device_info
    ctypedef struct rlx_pipeline_info

    ctypedef struct rlx_gemm_desc:
        const rlx_buffer *a
        const rlx_buffer *b
        rlx_buffer *c
        uint64_t a_offset, b_offset, c_offset
        int64_t m, n, k
        int64_t lda, ldb, ldc
        int trans_a, trans_b
        int dtype
        float alpha, beta
        int64_t batch
        int64_t stride_a, stride_b, stride_c
        int64_t outer
        int64_t outer_stride_a, outer_stride_b, outer_stride_c
        int b_dtype, c_dtype
        const rlx_buffer *bias
        uint64_t bias_offset
        const rlx_buffer *a_scale
        const rlx_buffer *b_scale
        uint64_t a_scale_offset, b_scale_offset
        int scale_mode

    cdef unsigned int RLX_SCHEDULE_DISPATCH
    cdef unsigned int RLX_SCHEDULE_GEMM
    cdef unsigned int RLX_SCHEDULE_SERIAL

    ctypedef struct rlx_schedule_cmd:
        uint32_t op
        uint32_t barrier_before
        rlx_pipeline *pipeline
        uint32_t n_bindings
        uint32_t groups[3]
        uint32_t threads[3]
        rlx_buffer *buffers[12]
        uint64_t offsets[12]
        rlx_gemm_desc gemm
        rlx_icb *icb
        uint32_t start, count

    ctypedef struct rlx_schedule_desc:
        uint32_t n_commands
        uint32_t flags
        const rlx_schedule_cmd *commands

    ctypedef struct rlx_shim_api:
        uint32_t abi_version
        uint32_t struct_size
        const char *backend
        const char *(*last_error)() noexcept nogil
        void *(*buffer_host_ptr)(rlx_buffer *buf) noexcept nogil
        int (*buffer_write)(rlx_buffer *buf, uint64_t offset, const void *src, uint64_t size) noexcept nogil
        int (*buffer_read)(const rlx_buffer *buf, uint64_t offset, void *dst, uint64_t size) noexcept nogil
        int (*cmd_begin)(rlx_device *dev, rlx_cmdbuf **out) noexcept nogil
        int (*cmd_set_pipeline)(rlx_cmdbuf *cb, rlx_pipeline *pipe) noexcept nogil
        int (*cmd_set_buffer)(rlx_cmdbuf *cb, uint32_t index, rlx_buffer *buf, uint64_t offset) noexcept nogil
        int (*cmd_set_bytes)(rlx_cmdbuf *cb, uint32_t index, const void *data, uint32_t size) noexcept nogil
        int (*cmd_dispatch)(rlx_cmdbuf *cb, const uint32_t *groups, const uint32_t *threads) noexcept nogil
        int (*cmd_barrier)(rlx_cmdbuf *cb) noexcept nogil
        int (*cmd_gemm)(rlx_cmdbuf *cb, const rlx_gemm_desc *desc) noexcept nogil
        int (*cmd_execute_icb)(rlx_cmdbuf *cb, rlx_icb *icb, uint32_t start, uint32_t count) noexcept nogil
        int (*cmd_commit)(rlx_cmdbuf *cb) noexcept nogil
        int (*cmd_wait)(rlx_cmdbuf *cb, double *device_seconds) noexcept nogil
        void (*cmd_release)(rlx_cmdbuf *cb) noexcept nogil
        int (*icb_create)(rlx_device *dev, uint32_t capacity, rlx_icb **out) noexcept nogil
        int (*icb_encode_dispatch)(rlx_icb *icb, uint32_t index, rlx_pipeline *pipe,
                                   uint32_t n_bindings, rlx_buffer *const *buffers,
                                   const uint64_t *offsets, const uint32_t *groups,
                                   const uint32_t *threads, uint32_t barrier_before) noexcept nogil
        void (*icb_free)(rlx_icb *icb) noexcept nogil
        int (*cmd_upload)(rlx_cmdbuf *cb, rlx_buffer *buf, uint64_t offset, const void *src,
                          uint64_t size) noexcept nogil
        int (*cmd_download)(rlx_cmdbuf *cb, const rlx_buffer *buf, uint64_t offset, void *dst,
                            uint64_t size) noexcept nogil
        int (*queue_create)(rlx_device *dev, rlx_queue **out) noexcept nogil
        void (*queue_free)(rlx_queue *queue) noexcept nogil
        int (*cmd_begin_on)(rlx_queue *queue, rlx_cmdbuf **out) noexcept nogil
        int (*schedule_create)(rlx_device *dev, const rlx_schedule_desc *desc, rlx_schedule **out) noexcept nogil
        int (*cmd_execute_schedule)(rlx_cmdbuf *cb, rlx_schedule *sched) noexcept nogil
        void (*schedule_free)(rlx_schedule *sched) noexcept nogil
        int (*cmd_commit_wait)(rlx_cmdbuf *cb, double *device_seconds) noexcept nogil
        int (*buffer_wrap)(rlx_device *dev, void *ptr, uint64_t size, rlx_buffer **out) noexcept nogil
        int (*buffer_rebind)(rlx_buffer *buf, void *ptr) noexcept nogil


cdef extern from "rlx_thunk.h" nogil:
    cdef unsigned int RLX_THUNK_DISPATCH
    cdef unsigned int RLX_THUNK_GEMM
    cdef unsigned int RLX_MAX_BINDINGS
    cdef unsigned int RLX_THUNK_NO_BINDING

    ctypedef struct rlx_thunk:
        uint32_t kind
        uint32_t barrier_before
        rlx_pipeline *pipeline
        uint32_t n_bindings
        uint32_t groups[3]
        uint32_t threads[3]
        rlx_buffer *buffers[12]
        uint64_t offsets[12]
        rlx_gemm_desc gemm
        uint8_t binding[12]
        uint8_t gemm_binding[6]
        uint8_t params_by_value
        uint32_t params_size
        uint64_t params_at
        const uint8_t *params

    ctypedef struct rlx_patch:
        uint64_t offset
        uint32_t symbol
        uint32_t pad


cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass


# A transfer between user memory and the arena. bound: a wrapped buffer
# (buffer_wrap) that the kernels read / write this value through; a run
# points it at the caller's array instead of copying (where the array
# allows), then back at the value's arena bytes. NULL: always copied.
ctypedef struct rlx_io:
    uint64_t offset
    uint64_t size
    rlx_buffer *bound
    uint32_t in_place      # this run reads / writes the caller's array (set and cleared under the lock)


# One step of a replayed run: a schedule the shim made once from the
# segments it covers (rlx/opt/segments.py: replay ranges and gemms), or, with
# schedule NULL, a direct segment's thunks [start, start+count) encoded every run.
ctypedef struct rlx_step:
    rlx_schedule *schedule
    rlx_schedule *serial      # its commands made with RLX_SCHEDULE_SERIAL (launch exploration), or NULL
    uint32_t start
    uint32_t count


cdef class Bindings:
    """Binding names -> entry index (the table a ThunkTable's buffers name)."""
    cdef readonly tuple names
    cdef dict _index


cdef class ThunkTable:
    """A growable rlx_thunk array; append_dispatch / append_gemm fill it."""
    cdef rlx_thunk *thunks         # bindings by entry (binding[], gemm_binding[]); no buffer pointers yet
    cdef uint32_t n_thunks
    cdef uint32_t capacity
    cdef readonly Bindings bindings
    cdef bytearray params_bytes    # the dispatches' params structs, at their thunks' params_at

    cdef rlx_thunk *_push(self) except NULL


cdef class Program:
    cdef const rlx_shim_api *api
    cdef rlx_device *device
    cdef rlx_buffer *arena
    cdef char *arena_host          # NULL when the arena is not host-visible
    cdef bint staged               # copies travel in the command buffer (cmd_upload / cmd_download)
    cdef bint commit_wait          # the shim commits and waits in one call (cmd_commit_wait)
    cdef bint bind_io              # runs bind inputs / outputs that have a bound buffer in place
    cdef rlx_thunk *thunks
    cdef uint32_t n_thunks
    cdef rlx_io *inputs
    cdef uint32_t n_inputs
    cdef rlx_io *outputs
    cdef uint32_t n_outputs
    cdef rlx_patch *patches
    cdef uint32_t n_patches
    cdef uint8_t *params_host      # the table's params bytes, patched as the arena is
    cdef rlx_patch *params_patches # patches of those bytes: offset into params_host
    cdef uint32_t n_params_patches
    cdef int64_t *dynamic
    cdef uint32_t n_dynamic
    cdef rlx_queue *queue          # this program's own queue, NULL: the device's (shim without queues)
    cdef rlx_step *steps           # a replayed run: usually one schedule
    cdef uint32_t n_steps
    cdef uint32_t n_segments
    cdef bint replay
    cdef pthread_mutex_t lock
    cdef double device_seconds
    # Launch exploration (RLX_CUDA_PDL=auto): the first runs alternate each
    # schedule with its serial form (RLX_SCHEDULE_SERIAL), each form's
    # fastest device time kept, then the faster form stays.
    cdef bint explore_launch
    cdef bint run_serial           # this run executes the serial forms
    cdef uint32_t launch_trials    # runs timed so far while exploring
    cdef double launch_best[2]     # fastest device seconds: [overlapped, serial]
    cdef int launch_choice         # -1 exploring, 0 overlapped, 1 serial
    # What runs did, counted (Program.counters()): thunks encoded one by
    # one, schedule executions, dynamic-value patches written.
    cdef uint64_t n_thunks_encoded
    cdef uint64_t n_schedules_run
    cdef uint64_t n_patches_written
    cdef char error[1024]
    cdef object keepalive

    cdef int run_nogil(self, const void *const *inputs, void *const *outputs) noexcept nogil
    cdef void _bind_io(self, const void *const *inputs, void *const *outputs) noexcept nogil
    cdef void _unbind_io(self) noexcept nogil
    cdef _find_params_patches(self, uint32_t arena)
    cdef void _patch_params_host(self) noexcept nogil
    cdef _record(self, segments)
    cdef _add_schedule(self, uint32_t start, uint32_t count)
    cdef int _encode_range(self, rlx_cmdbuf *cb, uint32_t start, uint32_t end) noexcept nogil
    cdef _raise(self, int status, what)
    cdef int _fail(self, int status, const char *what) noexcept nogil
    cdef int _encode(self, rlx_cmdbuf *cb) noexcept nogil
    cdef int _execute(self, rlx_cmdbuf *cb) noexcept nogil
    cdef int _begin(self, rlx_cmdbuf **cb) noexcept nogil
    cdef int _run_staged(self, const void *const *inputs, void *const *outputs) noexcept nogil
    cdef int _run_direct(self, const void *const *inputs, void *const *outputs) noexcept nogil
    cdef void _launch_observe(self) noexcept nogil
    cdef void _drop_unchosen_schedules(self) noexcept nogil


cdef int program_run(Program prog, const void *const *inputs, void *const *outputs) noexcept nogil
cdef int program_set_dynamic(Program prog, uint32_t symbol, int64_t value) noexcept nogil
cdef const char *program_error(Program prog) noexcept nogil
