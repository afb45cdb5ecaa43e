/*
 * The packed thunk table the Cython core (rlx/_core.pyx) walks per run.
 * rlx/_core.pyx ThunkTable lays these out from lowering's thunks (packed by
 * rlx/runtime/compiler.py); each buffer is named by an entry of the table's
 * binding table (arena, resident params, ...), which a Program resolves to
 * shim buffers once, so the run loop only reads memory. The shims never see
 * this struct (they do not include this header).
 */
#ifndef RLX_THUNK_H
#define RLX_THUNK_H

#include "rlx_shim.h"

#define RLX_THUNK_DISPATCH 0u
#define RLX_THUNK_GEMM 1u
#define RLX_THUNK_NO_BINDING 0xFFu   /* gemm_binding[3..5]: no bias / no scale */

typedef struct rlx_thunk {
    uint32_t kind;            /* RLX_THUNK_DISPATCH or RLX_THUNK_GEMM */
    uint32_t barrier_before;  /* 1: a hazard with an earlier thunk of this run */
    rlx_pipeline *pipeline;   /* dispatch only */
    uint32_t n_bindings;
    uint32_t groups[3];
    uint32_t threads[3];
    rlx_buffer *buffers[RLX_MAX_BINDINGS];
    uint64_t offsets[RLX_MAX_BINDINGS];
    rlx_gemm_desc gemm;       /* gemm only */
    /* Binding-table entries that buffers[] (dispatch) and the gemm's a, b,
     * c, bias, a_scale and b_scale were resolved from: read when a Program
     * is created, never by the run loop. */
    uint8_t binding[RLX_MAX_BINDINGS];
    uint8_t gemm_binding[6];
    /* Dispatch only: 1 where the pipeline takes the params struct by value
     * (rlx_pipeline_info.value_bindings): recorded, it keeps the bytes it
     * was recorded with, so a Program encodes it directly when a run
     * patches them. */
    uint8_t params_by_value;
    /* Dispatch only: the bytes of its params struct, the last binding.
     * Encoded directly, the params travel as those bytes (cmd_set_bytes),
     * which a CUDA kernel takes by value; a recorded dispatch binds the
     * params region, which holds the same bytes. params_size 0: none
     * declared, the last binding is bound as a buffer. */
    uint32_t params_size;
    uint64_t params_at;       /* where the bytes lie in the table's params bytes */
    const uint8_t *params;    /* a Program's copy of them: set when it is made */
} rlx_thunk;

/* A run-time value written into the params region before each run. */
typedef struct rlx_patch {
    uint64_t offset;          /* byte offset in the arena */
    uint32_t symbol;          /* index into the executable's dynamic values */
    uint32_t pad;
} rlx_patch;

#endif
