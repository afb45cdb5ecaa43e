/*
 * The ABI table and rlx_shim_get_api of a C shim (cuda, metal), written once
 * so every shim lists its entry points in the one order rlx_shim.h declares.
 * The including file defines each entry point under its rlx_shim_api field
 * name, and `fail`. (The host shim, C++, wraps allocating entries in GUARD
 * and spells its table out.)
 */
#ifndef RLX_SHIM_TABLE_H
#define RLX_SHIM_TABLE_H

#include "rlx_shim.h"

#define RLX_DEFINE_SHIM_API(backend_name)                                                          \
    /* A GPU runs the work wherever it is committed: commit, then wait. */                         \
    static rlx_status cmd_commit_wait(rlx_cmdbuf *cb, double *device_seconds) {                   \
        rlx_status s = cmd_commit(cb);                                                             \
        return s != RLX_OK ? s : cmd_wait(cb, device_seconds);                                     \
    }                                                                                              \
    /* A GPU's buffers are device memory, not the caller's: no wrapping. */                      \
    static rlx_status buffer_wrap(rlx_device *dev, void *ptr, uint64_t size, rlx_buffer **out) {  \
        (void)dev, (void)ptr, (void)size;                                                          \
        if (out) *out = NULL;                                                                      \
        return fail(RLX_ERR_UNSUPPORTED, "buffer_wrap: %s buffers are not the caller's memory",    \
                    backend_name);                                                                 \
    }                                                                                              \
    static rlx_status buffer_rebind(rlx_buffer *buf, void *ptr) {                                  \
        (void)buf, (void)ptr;                                                                      \
        return fail(RLX_ERR_UNSUPPORTED, "buffer_rebind: %s buffers are not the caller's memory",  \
                    backend_name);                                                                 \
    }                                                                                              \
    static const rlx_shim_api kApi = {                                                             \
        RLX_SHIM_ABI_VERSION, (uint32_t)sizeof(rlx_shim_api), backend_name,                        \
        last_error, unavailable_reason,                                                            \
        device_count, device_open, device_info, device_close,                                      \
        buffer_alloc, buffer_free, buffer_host_ptr, buffer_size, buffer_write, buffer_read,        \
        library_compile, library_free, pipeline_get, pipeline_free,                                \
        cmd_begin, cmd_set_pipeline, cmd_set_buffer, cmd_set_bytes, cmd_dispatch,                  \
        cmd_barrier, cmd_gemm, cmd_execute_icb, cmd_commit, cmd_wait, cmd_release,                 \
        icb_create, icb_encode_dispatch, icb_free,                                                 \
        cmd_upload, cmd_download,                                                                  \
        queue_create, queue_free, cmd_begin_on,                                                    \
        schedule_create, cmd_execute_schedule, schedule_free,                                      \
        cmd_commit_wait,                                                                           \
        buffer_wrap, buffer_rebind,                                                                \
    };                                                                                             \
    __attribute__((visibility("default"))) const rlx_shim_api *rlx_shim_get_api(uint32_t abi_version) { \
        if (abi_version != RLX_SHIM_ABI_VERSION) {                                                 \
            fail(RLX_ERR_UNSUPPORTED, "rlx_shim_get_api: %s shim implements ABI %u, not %u", backend_name, \
                 RLX_SHIM_ABI_VERSION, abi_version);                                               \
            return NULL;                                                                           \
        }                                                                                          \
        return &kApi;                                                                              \
    }

#endif
