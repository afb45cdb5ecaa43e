/* Indirect command buffers, execution (whole-schedule graphs; commit, wait, release),
 * copies that travel with a command buffer, and queues.
 * A part of the CUDA shim: csrc/cuda/shim.c includes it (one translation unit, every
 * function static); it is not compiled on its own. */

/* ---- indirect command buffers ------------------------------------------------------------ */
static rlx_status icb_create(rlx_device *d, uint32_t capacity, rlx_icb **out) {
    ARG_CHECK(d && out, "icb_create: NULL argument");
    *out = NULL;
    ARG_CHECK(capacity >= 1, "icb_create: capacity must be >= 1");
    rlx_icb *icb = calloc(1, sizeof *icb);
    if (icb) icb->entries = calloc(capacity, sizeof *icb->entries);
    if (!icb || !icb->entries) {
        free(icb);
        return fail(RLX_ERR_OOM, "icb_create: out of memory");
    }
    icb->dev = d, icb->capacity = capacity;
    *out = icb;
    return RLX_OK;
}

static rlx_status icb_encode_dispatch(rlx_icb *icb, uint32_t index, rlx_pipeline *p, uint32_t n_bindings,
                                      rlx_buffer *const *buffers, const uint64_t *offsets, const uint32_t groups[3],
                                      const uint32_t threads[3], uint32_t barrier_before) {
    (void)barrier_before;  /* graph nodes form a chain: each runs after the previous one */
    ARG_CHECK(icb, "icb_encode_dispatch: icb is NULL");
    ARG_CHECK(index < icb->capacity, "icb_encode_dispatch: index %u >= capacity %u", index, icb->capacity);
    ARG_CHECK(p, "icb_encode_dispatch: pipeline is NULL");
    ARG_CHECK(p->lib->dev == icb->dev, "icb_encode_dispatch: pipeline belongs to another device");
    ARG_CHECK(p->flags & RLX_PIPELINE_INDIRECT, "icb_encode_dispatch: pipeline lacks RLX_PIPELINE_INDIRECT");
    ARG_CHECK(n_bindings <= RLX_MAX_BINDINGS, "icb_encode_dispatch: %u bindings > %u", n_bindings, RLX_MAX_BINDINGS);
    ARG_CHECK(n_bindings >= p->n_params, "icb_encode_dispatch: the kernel takes %u buffers, %u given", p->n_params,
              n_bindings);
    ARG_CHECK(n_bindings == 0 || (buffers && offsets), "icb_encode_dispatch: buffers or offsets is NULL");
    rlx_status s = check_grid(icb->dev, "icb_encode_dispatch", p, groups, threads);
    if (s) return s;
    icb_entry e = {.fn = p->fn, .value_mask = p->value_mask};
    for (uint32_t i = 0; i < n_bindings; ++i) {
        if ((s = check_binding(icb->dev, "icb_encode_dispatch", i, buffers[i], offsets[i]))) return s;
        e.args[i] = buffers[i]->ptr + offsets[i];
    }
    /* By-value params: the bytes their bindings hold now, read once here;
     * every replay launches with them. */
    size_t total = 0;
    for (uint32_t i = 0; i < p->n_params; ++i)
        if (p->value_mask >> i & 1u) total += p->value_size[i];
    if (total && !(e.values = malloc(total))) return fail(RLX_ERR_OOM, "icb_encode_dispatch: out of memory");
    size_t at = 0;
    for (uint32_t i = 0; i < p->n_params && total; ++i) {
        if (!(p->value_mask >> i & 1u)) continue;
        s = read_value(icb->dev, "icb_encode_dispatch (params by value)", e.args[i],
                       buffers[i]->ptr + buffers[i]->size - e.args[i], p->value_size[i], e.values + at);
        if (s) return free(e.values), s;
        e.args[i] = at, at += p->value_size[i];
    }
    for (int i = 0; i < 3; ++i) e.groups[i] = groups[i], e.threads[i] = threads ? threads[i] : 1;
    pthread_mutex_lock(&icb->dev->mu);  /* a commit on another thread may be reading entries */
    e.version = icb->version = __atomic_add_fetch(&g_icb_version, 1, __ATOMIC_RELAXED);
    uint8_t *old = icb->entries[index].values;
    icb->entries[index] = e;
    pthread_mutex_unlock(&icb->dev->mu);
    free(old);
    return RLX_OK;
}

/* A launch's kernelParams: for each binding, where its value lies (the
 * pointer in args, or the by-value bytes at values + args[i]). */
static void launch_params(void *params[RLX_MAX_BINDINGS], CUdeviceptr args[RLX_MAX_BINDINGS], uint32_t value_mask,
                          uint8_t *values) {
    for (int j = 0; j < (int)RLX_MAX_BINDINGS; ++j)
        params[j] = (value_mask >> j & 1u) ? (void *)(values + args[j]) : (void *)&args[j];
}

static void icb_free(rlx_icb *icb) {
    if (!icb) return;
    rlx_device *d = icb->dev;
    if (set_ctx(d) == RLX_OK) {
        for (int i = 0; i < icb->n_graphs; ++i)
            if (icb->graphs[i].exec) cu.cuGraphExecDestroy(icb->graphs[i].exec);
    }
    for (uint32_t i = 0; i < icb->capacity; ++i) free(icb->entries[i].values);
    free(icb->entries), free(icb);
}

static rlx_status cmd_execute_icb(rlx_cmdbuf *cb, rlx_icb *icb, uint32_t start, uint32_t count) {
    CB_CHECK(cb, "cmd_execute_icb");
    RLX_CHECK_EXECUTE_ICB(cb, icb, start, count, icb->capacity);
    if (!count) return RLX_OK;
    return push(cb, &(cmd_t){.kind = CMD_ICB, .icb = icb, .start = start, .count = count});  /* read at commit */
}

/* The CUDA graph of entries [start, start+count): a chain of kernel nodes,
 * built on first use and kept per (start, count); rebuilt only when an entry
 * in the range was re-encoded. (The whole schedule, gemms included, could
 * later become one graph by capturing the stream around a commit.)
 * Called with the device lock held. */
static rlx_status icb_graph_for(rlx_icb *icb, uint32_t start, uint32_t count, CUgraphExec *out, char *err,
                                size_t err_size) {
    icb_graph *g = NULL;
    for (int i = 0; i < icb->n_graphs && !g; ++i)
        if (icb->graphs[i].start == start && icb->graphs[i].count == count) g = &icb->graphs[i];
    if (g && g->built != icb->version) {
        for (uint32_t i = start; i < start + count && g; ++i)
            if (icb->entries[i].version > g->built) {
                cu.cuGraphExecDestroy(g->exec);  /* an in-flight launch finishes first */
                g->exec = NULL;
            }
        g->built = icb->version;
    }
    if (g && g->exec) { *out = g->exec; return RLX_OK; }
    for (uint32_t i = start; i < start + count; ++i)
        if (!icb->entries[i].fn) {
            snprintf(err, err_size, "icb entry %u was never encoded", i);
            return RLX_ERR_DEVICE;
        }
    CUgraph graph = NULL;
    CUgraphNode prev = NULL, node;
    CUgraphExec exec = NULL;
    CUresult r = cu.cuGraphCreate(&graph, 0);
    for (uint32_t i = start; r == CUDA_SUCCESS && i < start + count; ++i) {
        icb_entry *e = &icb->entries[i];
        void *params[RLX_MAX_BINDINGS];
        launch_params(params, e->args, e->value_mask, e->values);
        CUDA_KERNEL_NODE_PARAMS_v1 kp = {e->fn, e->groups[0], e->groups[1], e->groups[2], e->threads[0],
                                         e->threads[1], e->threads[2], 0, params, NULL};
        r = cu.cuGraphAddKernelNode(&node, graph, prev ? &prev : NULL, prev ? 1 : 0, &kp);
        prev = node;
    }
    if (r == CUDA_SUCCESS) r = cu.cuGraphInstantiateWithFlags(&exec, graph, 0);
    if (graph) cu.cuGraphDestroy(graph);  /* the executable graph is independent of it */
    if (r != CUDA_SUCCESS) {
        snprintf(err, err_size, "building the CUDA graph of icb entries [%u, %u): %s (%d)", start, start + count,
                 cu_name(r), r);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? RLX_ERR_OOM : RLX_ERR_DEVICE;
    }
    if (!g) {
        if (icb->n_graphs < MAX_GRAPHS) {
            g = &icb->graphs[icb->n_graphs++];
        } else {  /* many distinct ranges: replace round-robin */
            g = &icb->graphs[icb->next_evict];
            icb->next_evict = (icb->next_evict + 1) % MAX_GRAPHS;
            if (g->exec) cu.cuGraphExecDestroy(g->exec);
        }
    }
    g->start = start, g->count = count, g->built = icb->version, g->exec = exec;
    *out = exec;
    return RLX_OK;
}

/* ---- schedules: the plan (csrc/rlx_schedule_plan.h) ----------------------------------- */
/* A schedule: its plan, the plan's commands
 * as cmd_gemm and cmd_execute_icb recorded them, and the one CUDA graph
 * captured from them at creation. Its gemms use a cuBLASLt workspace of the
 * schedule's own (a captured node keeps the address), so it may run on any
 * queue. */
#include "rlx_schedule_plan.h"
struct rlx_schedule {
    rlx_sched_plan plan;
    cmd_t *cmds;
    size_t n;
    CUdeviceptr lt_workspace;   /* 0 without cuBLASLt */
    CUgraphExec exec;           /* NULL: capture failed; commands launched one by one */
    int runs, retried;          /* uncaptured executions; a second capture tried after the first */
    int pdl;                    /* its kernels launched with PDL: the device's choice, off for RLX_SCHEDULE_SERIAL */
};

/* ---- execution: commit, wait, release ---------------------------------------------------- */
/* One of our kernels onto a stream. With pdl (the device's choice, or a
 * schedule's: RLX_SCHEDULE_SERIAL turns it off) it may start while
 * the previous kernel in the stream finishes (programmatic dependent launch):
 * every rlx kernel waits for its predecessor's memory before it touches a
 * buffer (griddepcontrol.wait in the CUDA prelude), so only the launch
 * latency overlaps. cuBLAS kernels are launched normally and keep the full
 * dependency on both sides. */
static CUresult launch_kernel(int pdl, CUstream stream, CUfunction fn, const uint32_t groups[3],
                              const uint32_t threads[3], void **params) {
    if (!pdl)
        return cu.cuLaunchKernel(fn, groups[0], groups[1], groups[2], threads[0], threads[1], threads[2], 0,
                                 stream, params, NULL);
    cu_launch_attribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = RLX_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmatic_stream_serialization_allowed = 1;
    const cu_launch_config cfg = {{groups[0], groups[1], groups[2]}, {threads[0], threads[1], threads[2]}, 0,
                                  stream, &attr, 1};
    return cu.cuLaunchKernelEx(&cfg, fn, params, NULL);
}

static void launch_cmds(rlx_cmdbuf *cb, CUstream stream, CUdeviceptr lt_workspace, const cmd_t *cmds, size_t n,
                        int capturing, int pdl, CUresult *rr, const char **what);

/* Captures a schedule's commands into sched->exec on stream (device lock
 * held). On any failure the schedule keeps running command by command, and
 * the caller's status and error are left as they were. */
static void schedule_capture(rlx_cmdbuf *cb, CUstream stream, rlx_schedule *sched) {
    CUgraph graph = NULL;
    CUresult r = cu.cuStreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */);
    const char *what = "";
    if (r != CUDA_SUCCESS) return;
    launch_cmds(cb, stream, sched->lt_workspace, sched->cmds, sched->n, 1, sched->pdl, &r, &what);
    CUresult end = cu.cuStreamEndCapture(stream, &graph);
    if (r == CUDA_SUCCESS && end == CUDA_SUCCESS && cb->status == RLX_OK && graph)
        if (cu.cuGraphInstantiateWithFlags(&sched->exec, graph, 0) != CUDA_SUCCESS) sched->exec = NULL;
    if (graph) cu.cuGraphDestroy(graph);
    cb->status = RLX_OK;  /* nothing ran during capture; a real launch reports errors */
    cb->error[0] = 0;
}

/* Launches everything onto the command buffer's stream; errors are kept for
 * cmd_wait. Called with the device lock held and the context current. */
static void launch_all(rlx_cmdbuf *cb) {
    const CUstream stream = cb_stream(cb);
    CUresult r = CUDA_SUCCESS;
    const char *what = "cuEventRecord";
    if (cb->bytes_len && cb->bytes_len > cb->scratch_cap) {
        if (cb->scratch) cu.cuMemFree(cb->scratch), cb->scratch = 0, cb->scratch_cap = 0;
        what = "cuMemAlloc (set_bytes scratch)";
        if ((r = cu.cuMemAlloc(&cb->scratch, cb->bytes_cap)) == CUDA_SUCCESS) cb->scratch_cap = cb->bytes_cap;
    }
    PHASE_T0(t_launch);
    if (r == CUDA_SUCCESS) r = cu.cuEventRecord(cb->ev0, stream), what = "cuEventRecord";
    for (size_t i = 0; r == CUDA_SUCCESS && i < cb->n_copies; ++i)
        if (!cb->copies[i].dst && !cb->copies[i].direct)
            r = cu.cuMemcpyHtoDAsync(cb->copies[i].buf->ptr + cb->copies[i].offset, cb->staging + cb->copies[i].at,
                                     cb->copies[i].size,
                                     stream), what = "cmd_upload";
    if (r == CUDA_SUCCESS && cb->bytes_len)
        r = cu.cuMemcpyHtoDAsync(cb->scratch, cb->bytes, cb->bytes_len, stream), what = "set_bytes upload";
    if (r == CUDA_SUCCESS) launch_cmds(cb, stream, cb_lt_workspace(cb), cb->cmds, cb->n, 0, cb->dev->pdl, &r, &what);
    for (size_t i = 0; r == CUDA_SUCCESS && cb->status == RLX_OK && i < cb->n_copies; ++i)
        if (cb->copies[i].dst && !cb->copies[i].direct)
            r = cu.cuMemcpyDtoHAsync(cb->staging + cb->copies[i].at, cb->copies[i].buf->ptr + cb->copies[i].offset,
                                     cb->copies[i].size,
                                     stream), what = "cmd_download";
    if (r != CUDA_SUCCESS && cb->status == RLX_OK) {
        cb->status = r == CUDA_ERROR_OUT_OF_MEMORY ? RLX_ERR_OOM : RLX_ERR_DEVICE;
        snprintf(cb->error, sizeof cb->error, "%s: %s (%d)", what, cu_name(r), r);
    }
    cb->recorded = cu.cuEventRecord(cb->ev1, stream) == CUDA_SUCCESS;
    PHASE_ADD(PH_LAUNCH, t_launch);
}

/* Commands onto the stream, in order. While capturing, ICB ranges are
 * launched kernel by kernel (the captured graph then holds them as nodes).
 * A schedule is its graph's launch; one whose capture failed runs its
 * commands, and is captured once more after its first such run (the first
 * cuBLAS call of a handle allocates, which a capture cannot hold). */
static void launch_cmds(rlx_cmdbuf *cb, CUstream stream, CUdeviceptr lt_workspace, const cmd_t *cmds, size_t n,
                        int capturing, int pdl, CUresult *rr, const char **what) {
    rlx_device *d = cb->dev;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; r == CUDA_SUCCESS && cb->status == RLX_OK && i < n; ++i) {
        const cmd_t *c = &cmds[i];
        if (c->kind == CMD_DISPATCH) {
            CUdeviceptr vals[RLX_MAX_BINDINGS];
            void *params[RLX_MAX_BINDINGS];
            for (int j = 0; j < (int)RLX_MAX_BINDINGS; ++j)
                vals[j] = (c->bytes_mask >> j & 1u) ? cb->scratch + c->args[j] : c->args[j];
            launch_params(params, vals, c->value_mask, cb->bytes);
            *what = "cuLaunchKernel";
            r = launch_kernel(pdl, stream, c->fn, c->groups, c->threads, params);
        } else if (c->kind == CMD_GEMM) {
            cb->status = run_gemm(d, stream, lt_workspace, &c->gemm, c->gemm_ptrs, c->plan, cb->error,
                                  sizeof cb->error);
        } else if (c->kind == CMD_SCHEDULE) {
            rlx_schedule *sc = c->sched;
            if (!sc->exec && sc->runs > 0 && !sc->retried) sc->retried = 1, schedule_capture(cb, stream, sc);
            PHASE_T0(t_sched);
            if (sc->exec) {
                r = cu.cuGraphLaunch(sc->exec, stream), *what = "cuGraphLaunch (schedule)";
                PHASE_ADD(PH_SCHEDULE_GRAPH, t_sched);
            } else {
                ++sc->runs;
                launch_cmds(cb, stream, sc->lt_workspace, sc->cmds, sc->n, 0, sc->pdl, &r, what);
                PHASE_ADD(PH_SCHEDULE_UNCAPTURED, t_sched);
            }
        } else if (capturing) {
            for (uint32_t e = c->start; r == CUDA_SUCCESS && cb->status == RLX_OK && e < c->start + c->count; ++e) {
                icb_entry *en = &c->icb->entries[e];
                if (!en->fn) {
                    cb->status = RLX_ERR_DEVICE;
                    snprintf(cb->error, sizeof cb->error, "icb entry %u was never encoded", e);
                    break;
                }
                void *params[RLX_MAX_BINDINGS];
                launch_params(params, en->args, en->value_mask, en->values);
                *what = "cuLaunchKernel (capture)";
                r = launch_kernel(pdl, stream, en->fn, en->groups, en->threads, params);
            }
        } else {
            CUgraphExec exec = NULL;
            cb->status = icb_graph_for(c->icb, c->start, c->count, &exec, cb->error, sizeof cb->error);
            if (cb->status == RLX_OK) r = cu.cuGraphLaunch(exec, stream), *what = "cuGraphLaunch";
        }
    }
    *rr = r;
}

static rlx_status cmd_commit(rlx_cmdbuf *cb) {
    CB_CHECK(cb, "cmd_commit");
    rlx_device *d = cb->dev;
    PHASE_T0(t_commit);
    rlx_status s = set_ctx(d);
    if (s) return s;
    pthread_mutex_lock(&d->mu);
    launch_all(cb);
    pthread_mutex_unlock(&d->mu);
    cb->state = CB_COMMITTED;
    PHASE_ADD(PH_COMMIT, t_commit);
    return RLX_OK;
}

static rlx_status cmd_wait(rlx_cmdbuf *cb, double *device_seconds) {
    ARG_CHECK(cb, "cmd_wait: command buffer is NULL");
    ARG_CHECK(cb->state == CB_COMMITTED, "cmd_wait: command buffer was not committed");
    if (!cb->waited) {
        rlx_device *d = cb->dev;
        PHASE_T0(t_sync);
        CUresult r = cu.cuCtxSetCurrent(d->ctx);
        if (r == CUDA_SUCCESS) r = cb->recorded ? cu.cuEventSynchronize(cb->ev1) : cu.cuStreamSynchronize(cb_stream(cb));
        PHASE_ADD(PH_SYNC, t_sync);
        PHASE_T0(t_elapsed);
        float ms = 0;
        if (r == CUDA_SUCCESS && cb->recorded && cu.cuEventElapsedTime(&ms, cb->ev0, cb->ev1) == CUDA_SUCCESS)
            cb->seconds = ms * 1e-3;
        PHASE_ADD(PH_ELAPSED, t_elapsed);
        if (r != CUDA_SUCCESS && cb->status == RLX_OK) {  /* an error of the kernels themselves */
            cb->status = RLX_ERR_DEVICE;
            snprintf(cb->error, sizeof cb->error, "the GPU reported %s (%d) while executing", cu_name(r), r);
        }
        for (size_t i = 0; cb->status == RLX_OK && i < cb->n_copies; ++i) {
            struct stage_copy *c = &cb->copies[i];
            if (!c->dst) continue;
            if (!c->direct) {
                pmc_copy(&d->copier, c->dst, cb->staging + c->at, c->size);
                continue;
            }
            const rlx_status s = buffer_read(c->buf, c->offset, c->dst, c->size);  /* cb's work is done */
            if (s != RLX_OK) cb->status = s, snprintf(cb->error, sizeof cb->error, "cmd_download: %s", last_error());
        }
        cb->waited = 1;
    }
    if (device_seconds) *device_seconds = cb->seconds;
    if (cb->status != RLX_OK) fail(cb->status, "cmd_wait: %s", cb->error);
    return cb->status;
}

static void cmd_release(rlx_cmdbuf *cb) {
    if (!cb) return;
    PHASE_T0(t_release);
    if (cb->state == CB_COMMITTED) cmd_wait(cb, NULL);
    rlx_device *d = cb->dev;
    cb->n = 0, cb->bytes_len = 0, cb->pipe = NULL, cb->bind_set = cb->bind_bytes = 0;
    cb->n_copies = 0, cb->staging_len = 0, cb->queue = NULL;
    cb->state = CB_RECORDING, cb->waited = cb->recorded = 0, cb->status = RLX_OK, cb->error[0] = 0;
    cb->seconds = 0;
    pthread_mutex_lock(&d->spare_mu);
    const int keep = d->n_spare < 8;
    if (keep) cb->next = d->spare, d->spare = cb, ++d->n_spare;
    pthread_mutex_unlock(&d->spare_mu);
    PHASE_ADD(PH_RELEASE, t_release);
    if (keep) return;
    if (set_ctx(d) == RLX_OK) {
        cu.cuEventDestroy(cb->ev0), cu.cuEventDestroy(cb->ev1);
        if (cb->scratch) cu.cuMemFree(cb->scratch);
        if (cb->staging) cu.cuMemFreeHost(cb->staging);
    }
    free(cb->cmds), free(cb->bytes), free(cb->copies), free(cb);
}

/* ---- schedules: one CUDA graph each, captured at creation -------------------------------- */
static void schedule_free(rlx_schedule *sched) {
    if (!sched) return;
    /* A schedule whose plan failed to build has no device (the plan was
     * cleared) and owns no CUDA object yet. */
    if (sched->plan.dev && set_ctx(sched->plan.dev) == RLX_OK) {
        if (sched->exec) cu.cuGraphExecDestroy(sched->exec);  /* an in-flight launch finishes first */
        if (sched->lt_workspace) cu.cuMemFree(sched->lt_workspace);
    }
    sched_plan_clear(&sched->plan);
    free(sched->cmds), free(sched);
}

/* The plan is encoded into a command buffer that is never committed: that
 * checks every gemm and ICB range and makes the gemms' cuBLASLt plans and
 * pointer arrays; its commands are captured into one graph on the device's
 * stream, under the device lock (nothing else launches there meanwhile). */
static rlx_status schedule_create(rlx_device *d, const rlx_schedule_desc *desc, rlx_schedule **out) {
    ARG_CHECK(out, "schedule_create: out is NULL");
    *out = NULL;
    rlx_schedule *sched = calloc(1, sizeof *sched);
    if (!sched) return fail(RLX_ERR_OOM, "schedule_create: out of memory");
    rlx_status s = sched_plan_build(d, desc, &sched->plan);
    sched->pdl = d->pdl && !(desc->flags & RLX_SCHEDULE_SERIAL);
    if (s == RLX_OK) s = set_ctx(d);
    if (s == RLX_OK && d->info.gemm_bias) {
        const CUresult r = cu.cuMemAlloc(&sched->lt_workspace, LT_WORKSPACE);
        if (r != CUDA_SUCCESS) sched->lt_workspace = 0, s = cu_fail(r, "schedule_create (cuBLASLt workspace)");
    }
    rlx_cmdbuf *trial = NULL;
    if (s == RLX_OK && (s = cmd_begin(d, &trial)) == RLX_OK) {
        s = sched_plan_encode(trial, &sched->plan);
        if (s == RLX_OK && trial->n && !(sched->cmds = malloc(trial->n * sizeof *sched->cmds)))
            s = fail(RLX_ERR_OOM, "schedule_create: out of memory");
        if (s == RLX_OK) {
            if (trial->n) memcpy(sched->cmds, trial->cmds, trial->n * sizeof *sched->cmds);
            sched->n = trial->n;
            pthread_mutex_lock(&d->mu);
            if (sched->n) schedule_capture(trial, d->stream, sched);
            pthread_mutex_unlock(&d->mu);
        }
        cmd_release(trial);
    }
    if (s != RLX_OK) return schedule_free(sched), s;
    *out = sched;
    return RLX_OK;
}

static rlx_status cmd_execute_schedule(rlx_cmdbuf *cb, rlx_schedule *sched) {
    CB_CHECK(cb, "cmd_execute_schedule");
    ARG_CHECK(sched, "cmd_execute_schedule: schedule is NULL");
    ARG_CHECK(sched->plan.dev == cb->dev, "cmd_execute_schedule: schedule belongs to another device");
    if (!sched->n) return RLX_OK;
    PHASE_T0(t_exec);
    const rlx_status s = push(cb, &(cmd_t){.kind = CMD_SCHEDULE, .sched = sched});
    PHASE_ADD(PH_EXECUTE_SCHEDULE, t_exec);
    return s;
}

/* ---- copies that travel with a command buffer ------------------------------------------ */
/* One more copy record. */
static rlx_status copy_reserve(rlx_cmdbuf *cb) {
    if (cb->n_copies == cb->copies_cap) {
        const size_t cap = cb->copies_cap ? 2 * cb->copies_cap : 8;
        struct stage_copy *p = realloc(cb->copies, cap * sizeof *p);
        if (!p) return fail(RLX_ERR_OOM, "command buffer: out of memory");
        cb->copies = p, cb->copies_cap = cap;
    }
    return RLX_OK;
}

/* Room for size more staging bytes (16-aligned). */
static rlx_status stage_reserve(rlx_cmdbuf *cb, size_t size, size_t *at) {
    *at = (cb->staging_len + 15) & ~(size_t)15;
    if (*at + size > cb->staging_cap) {
        size_t cap = cb->staging_cap ? cb->staging_cap : 4096;
        while (cap < *at + size) cap *= 2;
        rlx_status s = set_ctx(cb->dev);
        if (s) return s;
        void *p = NULL;
        CU_CHECK(cu.cuMemAllocHost(&p, cap), "cuMemAllocHost (staging)");
        if (cb->staging_len) memcpy(p, cb->staging, cb->staging_len);
        if (cb->staging) cu.cuMemFreeHost(cb->staging);
        cb->staging = p, cb->staging_cap = cap;
    }
    cb->staging_len = *at + size;
    return RLX_OK;
}

/* Copies go through pinned staging, so they cost no synchronization of their
 * own; from 1 MiB the host side is split over several threads (one thread
 * copied at a third of the link's speed: BERT 32 x 128's 6.3 MB input and
 * output cost 0.5-0.8 ms more that way, and the driver's own pageable copy
 * 0.3-0.9 ms more, on the H200). Copies above staging_max go direct. */
static rlx_status cmd_upload(rlx_cmdbuf *cb, rlx_buffer *b, uint64_t offset, const void *src, uint64_t size) {
    CB_CHECK(cb, "cmd_upload");
    rlx_status s = check_copy("cmd_upload", b, offset, src, size);
    if (s) return s;
    rlx_device *d = cb->dev;
    ARG_CHECK(b->dev == d, "cmd_upload: buffer belongs to another device");
    if (!size || (s = copy_reserve(cb))) return s;
    if (size > d->staging_max) {
        /* In stream order, ahead of cb's commands (launched at commit); with a
         * pageable src the call returns once src has been read. */
        if ((s = set_ctx(d))) return s;
        pthread_mutex_lock(&d->mu);  /* no schedule capture is under way on the stream */
        const CUresult r = cu.cuMemcpyHtoDAsync(b->ptr + offset, src, size, cb_stream(cb));
        pthread_mutex_unlock(&d->mu);
        CU_CHECK(r, "cmd_upload (direct)");
        cb->copies[cb->n_copies++] = (struct stage_copy){b, offset, 0, size, NULL, 1};
        return RLX_OK;
    }
    size_t at;
    if ((s = stage_reserve(cb, size, &at))) return s;
    pmc_copy(&d->copier, cb->staging + at, src, size);
    cb->copies[cb->n_copies++] = (struct stage_copy){b, offset, at, size, NULL, 0};
    return RLX_OK;
}

static rlx_status cmd_download(rlx_cmdbuf *cb, const rlx_buffer *b, uint64_t offset, void *dst, uint64_t size) {
    CB_CHECK(cb, "cmd_download");
    rlx_status s = check_copy("cmd_download", b, offset, dst, size);
    if (s) return s;
    ARG_CHECK(b->dev == cb->dev, "cmd_download: buffer belongs to another device");
    if (!size || (s = copy_reserve(cb))) return s;
    const int direct = size > cb->dev->staging_max;  /* then read in cmd_wait */
    size_t at = 0;
    if (!direct && (s = stage_reserve(cb, size, &at))) return s;
    cb->copies[cb->n_copies++] = (struct stage_copy){b, offset, at, size, dst, direct};
    return RLX_OK;
}

/* ---- queues --------------------------------------------------------------------------- */
static rlx_status queue_create(rlx_device *d, rlx_queue **out) {
    ARG_CHECK(d && out, "queue_create: NULL argument");
    *out = NULL;
    if (!d->queues)
        return fail(RLX_ERR_UNSUPPORTED, "queue_create: queues are off on this device (device option queues=1, "
                    "RLX_CUDA_QUEUES=1)");
    rlx_status s = set_ctx(d);
    if (s) return s;
    rlx_queue *q = calloc(1, sizeof *q);
    if (!q) return fail(RLX_ERR_OOM, "queue_create: out of memory");
    q->dev = d;
    CUresult r = cu.cuStreamCreate(&q->stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS && d->info.gemm_bias) r = cu.cuMemAlloc(&q->lt_workspace, LT_WORKSPACE);
    if (r != CUDA_SUCCESS) {
        if (q->stream) cu.cuStreamDestroy(q->stream);
        free(q);
        return cu_fail(r, "queue_create");
    }
    *out = q;
    return RLX_OK;
}

static void queue_free(rlx_queue *q) {
    if (!q || set_ctx(q->dev) != RLX_OK) return;
    cu.cuStreamSynchronize(q->stream);
    cu.cuStreamDestroy(q->stream);
    if (q->lt_workspace) cu.cuMemFree(q->lt_workspace);
    free(q);
}

static rlx_status cmd_begin_on(rlx_queue *q, rlx_cmdbuf **out) {
    ARG_CHECK(q && out, "cmd_begin_on: NULL argument");
    rlx_status s = cmd_begin(q->dev, out);
    if (s == RLX_OK) (*out)->queue = q;
    return s;
}
