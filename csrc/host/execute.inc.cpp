// Indirect command buffers, execution (commit, wait, release), copies that travel
// with a command buffer, and queues.
// A part of the host shim: csrc/host/shim.cpp includes it (one translation unit, every
// function in an anonymous namespace); it is not compiled on its own.

namespace {

// ---- indirect command buffers -------------------------------------------------------
rlx_status icb_create(rlx_device *d, uint32_t capacity, rlx_icb **out) {
    ARG_CHECK(d && out, "icb_create: NULL argument");
    *out = nullptr;
    ARG_CHECK(capacity >= 1, "icb_create: capacity must be >= 1");
    *out = new rlx_icb{d, std::vector<IcbEntry>(capacity)};
    return RLX_OK;
}

rlx_status icb_encode_dispatch(rlx_icb *icb, uint32_t index, rlx_pipeline *p, uint32_t n_bindings,
                               rlx_buffer *const *buffers, const uint64_t *offsets, const uint32_t groups[3],
                               const uint32_t threads[3], uint32_t barrier_before) {
    (void)barrier_before;  // entries run in order, each to completion
    ARG_CHECK(icb, "icb_encode_dispatch: icb is NULL");
    ARG_CHECK(index < icb->entries.size(), "icb_encode_dispatch: index %u >= capacity %zu", index,
              icb->entries.size());
    ARG_CHECK(p, "icb_encode_dispatch: pipeline is NULL");
    ARG_CHECK(p->lib->dev == icb->dev, "icb_encode_dispatch: pipeline belongs to another device");
    // Metal needs the pipeline made for ICBs; checking here keeps host tests honest.
    ARG_CHECK(p->flags & RLX_PIPELINE_INDIRECT, "icb_encode_dispatch: pipeline lacks RLX_PIPELINE_INDIRECT");
    ARG_CHECK(n_bindings <= RLX_MAX_BINDINGS, "icb_encode_dispatch: %u bindings > %u", n_bindings,
              RLX_MAX_BINDINGS);
    ARG_CHECK(n_bindings == 0 || (buffers && offsets), "icb_encode_dispatch: buffers or offsets is NULL");
    if (rlx_status s = check_grid("icb_encode_dispatch", groups, threads)) return s;
    IcbEntry e;
    for (uint32_t i = 0; i < n_bindings; ++i) {
        if (rlx_status s = check_binding(icb->dev, "icb_encode_dispatch", i, buffers[i], offsets[i])) return s;
        e.bufs[i] = buffers[i]->ptr + offsets[i];
        if (buffers[i]->wrapped) {
            e.wrapped |= 1u << i;
            e.buffers[i] = buffers[i];
            e.offsets[i] = offsets[i];
        }
    }
    e.fn = p->fn;
    memcpy(e.groups, groups, sizeof e.groups);
    icb->entries[index] = e;
    return RLX_OK;
}

void icb_free(rlx_icb *icb) { delete icb; }

rlx_status cmd_execute_icb(rlx_cmdbuf *cb, rlx_icb *icb, uint32_t start, uint32_t count) {
    CB_CHECK(cb, "cmd_execute_icb");
    RLX_CHECK_EXECUTE_ICB(cb, icb, start, count, icb->entries.size());
    // Entries are read at execution, so encoding may still change them until commit.
    return push(cb, Cmd{CMD_ICB, {}, nullptr, {}, icb, start, count});
}

// ---- execution: commit, wait, release -------------------------------------------------------
void run_dispatch(rlx_device *d, kernel_fn fn, void *const *bufs, const uint32_t g[3]) {
    const uint64_t dispatch = next_dispatch();
    if ((uint64_t)g[0] * g[1] * g[2] == 1 || d->pool.workers.empty()) {
        // One group: call it right here, no pool (tiny ops cost a function call).
        // No workers: the groups run one after another on this thread.
        for (uint64_t i = 0, n = (uint64_t)g[0] * g[1] * g[2]; i < n; ++i)
            run_group(fn, bufs, g[0], g[1], g[2], i, dispatch);
        return;
    }
    parallel_for(&d->pool, fn, bufs, g, dispatch);
}

// Runs one command buffer; the caller holds dev->exec_mu.
void execute(rlx_cmdbuf *cb) {
    rlx_device *d = cb->dev;
    cb->state.store(CB_RUNNING, std::memory_order_relaxed);
    const double t0 = now_s();
    rlx_status st = RLX_OK;
    for (const rlx_cmdbuf::Upload &u : cb->uploads) memcpy(u.at, u.bytes.data(), u.bytes.size());
    try {
        for (const Cmd &c : cb->cmds) {
            if (c.kind == CMD_DISPATCH) {
                run_dispatch(d, c.fn, c.bufs, c.groups);
            } else if (c.kind == CMD_GEMM) {
                run_gemm(d, cb->gemms[c.start]);
            } else if (c.kind == CMD_ICB) {
                for (uint32_t i = c.start; i < c.start + c.count; ++i) {
                    const IcbEntry &e = c.icb->entries[i];
                    if (!e.fn) {
                        st = RLX_ERR_DEVICE;
                        cb->error = "icb entry " + std::to_string(i) + " was never encoded";
                        break;
                    }
                    if (e.wrapped) {   // a wrapped buffer's memory is the one bound now
                        void *bufs[RLX_MAX_BINDINGS];
                        memcpy(bufs, e.bufs, sizeof bufs);
                        for (uint32_t j = 0; j < RLX_MAX_BINDINGS; ++j)
                            if (e.wrapped >> j & 1u) bufs[j] = e.buffers[j]->ptr + e.offsets[j];
                        run_dispatch(d, e.fn, bufs, e.groups);
                    } else {
                        run_dispatch(d, e.fn, e.bufs, e.groups);
                    }
                }
                if (st != RLX_OK) break;
            }
            // CMD_BARRIER: commands run in order and each finishes before the
            // next starts, so a barrier has nothing left to do here.
        }
    } catch (...) {  // only f16 gemm scratch allocates
        st = RLX_ERR_OOM;
        cb->error = "out of memory while executing";
    }
    if (st == RLX_OK)
        for (const rlx_cmdbuf::Download &dl : cb->downloads) memcpy(dl.dst, dl.at, dl.size);
    cb->seconds = now_s() - t0;
    cb->status = st;
    cb->state.store(CB_DONE, std::memory_order_release);  // last touch: the waiter may free cb now
}

// Executes queued command buffers in order until `target` is done (target
// NULL: exactly one). Called by the executor thread and by waiters that find
// their buffer not started yet: that is the "claim", and it is ordered.
void drain(rlx_device *d, rlx_cmdbuf *target) {
    std::lock_guard<std::mutex> ex(d->exec_mu);
    for (;;) {
        if (target && target->state.load(std::memory_order_acquire) == CB_DONE) return;
        rlx_cmdbuf *cb;
        {
            std::lock_guard<std::mutex> lk(d->q_mu);
            if (d->queue.empty()) return;
            cb = d->queue.front();
            d->queue.pop_front();
        }
        execute(cb);
        if (!target) return;
    }
}

void executor_main(rlx_device *d) {
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(d->q_mu);
            d->q_cv.wait(lk, [&] { return d->stopping || !d->queue.empty(); });
            if (d->queue.empty()) return;  // stopping, and nothing left to run
        }
        drain(d, nullptr);
    }
}

// Queues cb behind everything committed before it.
void enqueue(rlx_cmdbuf *cb) {
    rlx_device *d = cb->dev;
    std::lock_guard<std::mutex> lk(d->q_mu);
    d->queue.push_back(cb);  // a throw (GUARD) leaves cb recording, as if never committed
    cb->state.store(CB_QUEUED, std::memory_order_relaxed);  // nobody pops it before we unlock
}

rlx_status cmd_commit(rlx_cmdbuf *cb) {
    CB_CHECK(cb, "cmd_commit");
    rlx_device *d = cb->dev;
    enqueue(cb);
    {
        std::lock_guard<std::mutex> lk(d->q_mu);
        if (!d->executor.joinable() && !d->stopping) {
            try {
                d->executor = std::thread(executor_main, d);  // started lazily, once
            } catch (...) {
                // No executor thread: still correct, cmd_wait drains the queue itself.
            }
        }
    }
    d->q_cv.notify_one();
    return RLX_OK;
}

rlx_status cmd_wait(rlx_cmdbuf *cb, double *device_seconds) {
    ARG_CHECK(cb, "cmd_wait: command buffer is NULL");
    const int st = cb->state.load(std::memory_order_acquire);
    ARG_CHECK(st != CB_RECORDING, "cmd_wait: command buffer was not committed");
    // Not started yet: claim it (and anything committed before it) and run it
    // on this thread. Running on the executor: spin briefly, then block on
    // exec_mu inside drain until the executor is done with it.
    if (st == CB_RUNNING)
        for (int i = 0; i < kSpin && cb->state.load(std::memory_order_acquire) != CB_DONE; ++i) CPU_RELAX();
    if (cb->state.load(std::memory_order_acquire) != CB_DONE) drain(cb->dev, cb);
    if (device_seconds) *device_seconds = cb->seconds;
    if (cb->status != RLX_OK) t_error = "cmd_wait: " + cb->error;
    return cb->status;
}

// The caller blocks anyway, so it runs cb itself (after whatever was committed
// before it) and no executor is woken: waking one costs the caller a
// futex round trip, and the work then runs on another core with cold caches
// (a one-op run's median was 2.5x its minimum, a replayed chain's 1.6x).
rlx_status cmd_commit_wait(rlx_cmdbuf *cb, double *device_seconds) {
    CB_CHECK(cb, "cmd_commit_wait");
    enqueue(cb);
    return cmd_wait(cb, device_seconds);
}

void cmd_release(rlx_cmdbuf *cb) {
    if (!cb) return;
    if (cb->state.load(std::memory_order_acquire) != CB_RECORDING) cmd_wait(cb, nullptr);
    rlx_device *d = cb->dev;
    cb->cmds.clear();
    cb->gemms.clear();
    cb->bytes.clear();
    cb->uploads.clear();
    cb->downloads.clear();
    cb->pipe = nullptr;
    memset(cb->bind, 0, sizeof cb->bind);
    cb->status = RLX_OK;
    cb->error.clear();
    cb->seconds = 0;
    cb->state.store(CB_RECORDING, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lk(d->spare_mu);
    if (d->spare.size() < d->spare.capacity()) d->spare.push_back(cb);  // capacity reserved: no throw
    else delete cb;
}

// ---- schedules: the plan (csrc/rlx_schedule_plan.h), replayed as recorded commands ----------
}  // namespace

#define RLX_SCHEDULE_PLAN_MAKE
#include "rlx_schedule_plan.h"  // at file scope: rlx_schedule below holds its plan
struct rlx_schedule { rlx_sched_plan plan; };

namespace {
rlx_status schedule_create(rlx_device *d, const rlx_schedule_desc *desc, rlx_schedule **out) {
    ARG_CHECK(out, "schedule_create: out is NULL");
    *out = nullptr;
    auto sched = std::make_unique<rlx_schedule>();
    if (rlx_status s = sched_plan_make(d, desc, &sched->plan)) return s;
    *out = sched.release();
    return RLX_OK;
}

// Appends the plan's commands to cb: the executor walks them like any others.
rlx_status cmd_execute_schedule(rlx_cmdbuf *cb, rlx_schedule *sched) {
    CB_CHECK(cb, "cmd_execute_schedule");
    ARG_CHECK(sched, "cmd_execute_schedule: schedule is NULL");
    ARG_CHECK(sched->plan.dev == cb->dev, "cmd_execute_schedule: schedule belongs to another device");
    return sched_plan_encode(cb, &sched->plan);
}

void schedule_free(rlx_schedule *sched) {
    if (sched) sched_plan_clear(&sched->plan);
    delete sched;
}

// ---- copies that travel with a command buffer -----------------------------------------------
rlx_status cmd_upload(rlx_cmdbuf *cb, rlx_buffer *b, uint64_t offset, const void *src, uint64_t size) {
    CB_CHECK(cb, "cmd_upload");
    if (rlx_status s = check_copy("cmd_upload", b, offset, src, size)) return s;
    ARG_CHECK(b->dev == cb->dev, "cmd_upload: buffer belongs to another device");
    const uint8_t *from = (const uint8_t *)src;
    cb->uploads.push_back({b->ptr + offset, std::vector<uint8_t>(from, from + size)});
    return RLX_OK;
}

rlx_status cmd_download(rlx_cmdbuf *cb, const rlx_buffer *b, uint64_t offset, void *dst, uint64_t size) {
    CB_CHECK(cb, "cmd_download");
    if (rlx_status s = check_copy("cmd_download", b, offset, dst, size)) return s;
    ARG_CHECK(b->dev == cb->dev, "cmd_download: buffer belongs to another device");
    cb->downloads.push_back({b->ptr + offset, dst, size});
    return RLX_OK;
}

// ---- queues ---------------------------------------------------------------------------------
rlx_status queue_create(rlx_device *d, rlx_queue **out) {
    ARG_CHECK(d && out, "queue_create: NULL argument");
    *out = new rlx_queue{d};
    return RLX_OK;
}

void queue_free(rlx_queue *q) { delete q; }

rlx_status cmd_begin_on(rlx_queue *q, rlx_cmdbuf **out) {
    ARG_CHECK(q, "cmd_begin_on: queue is NULL");
    return cmd_begin(q->dev, out);
}

}  // namespace
