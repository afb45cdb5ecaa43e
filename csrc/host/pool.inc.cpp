// Declarations, errors and the thread pool.
// A part of the host shim: csrc/host/shim.cpp includes it (one translation unit, every
// function in an anonymous namespace); it is not compiled on its own.

namespace {

typedef void (*kernel_fn)(const rlx_cpu_ctx *);
typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                         int lda, const float *b, int ldb, float beta, float *c, int ldc);
constexpr uint64_t kAlign = 128;       // buffer alignment (matches the arena's slot alignment)
constexpr uint32_t kMaxBytes = 4096;   // cmd_set_bytes limit (the ABI's)
constexpr int kSpin = 2000;            // pause iterations (~50 µs) before a thread sleeps or yields

// ---- errors -----------------------------------------------------------------
thread_local std::string t_error;

rlx_status fail(rlx_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
rlx_status fail(rlx_status s, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t_error = msg;
    return s;
}
#define ARG_CHECK(cond, ...) \
    do { if (!(cond)) return fail(RLX_ERR_ARG, __VA_ARGS__); } while (0)

// Wraps an entry point so that a C++ exception (bad_alloc, system_error)
// becomes RLX_ERR_OOM instead of unwinding into C.
template <typename F, F f> struct Guard;
template <typename... A, rlx_status (*f)(A...)> struct Guard<rlx_status (*)(A...), f> {
    static rlx_status call(A... a) noexcept {
        try {
            return f(a...);
        } catch (...) {
            return fail(RLX_ERR_OOM, "out of memory (or threads)");
        }
    }
};
#define GUARD(f) Guard<decltype(&f), &f>::call

// Spin a little (the other side is usually about to finish), then yield so an
// oversubscribed 2-core machine still makes progress.
template <typename F> void spin_until(F done) {
    for (int i = 0; !done(); ++i)
        if (i < kSpin) CPU_RELAX(); else std::this_thread::yield();
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- thread pool: parallel-for over the groups of one dispatch ---------------
// Workers spin for a while after a job (dispatches come in bursts) and then
// sleep on a condvar, so an idle device burns no CPU. One job at a time: only
// the thread that holds the device's exec_mu publishes jobs.
struct Pool {
    std::vector<std::thread> workers;
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;                       // guarded by mu
    std::atomic<int> sleepers{0};
    std::atomic<uint64_t> generation{0};     // bumped per job; workers watch it
    std::atomic<bool> open{false};           // a job may be joined
    std::atomic<int> inside{0};              // workers that joined the current job
    kernel_fn fn = nullptr;                  // the job; written only while !open
    void *bufs[RLX_MAX_BINDINGS] = {};
    uint32_t gx = 1, gy = 1, gz = 1;
    uint64_t total = 0;
    uint64_t dispatch = 0;                   // the job's dispatch number (rlx_cpu_ctx::dispatch)
    uint64_t parts = 1;                      // threads that may take groups
    // The two counters every claim writes, each on a cache line of its own:
    // sharing one with the job above made every claim re-fetch the job too.
    alignas(64) std::atomic<uint64_t> next{0};  // next group to take
    alignas(64) std::atomic<uint64_t> done{0};  // groups finished
};

// A new number per dispatch, unique in the process (every device's pool).
uint64_t next_dispatch() {
    static std::atomic<uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

void run_group(kernel_fn fn, void *const *bufs, uint32_t gx, uint32_t gy, uint32_t gz, uint64_t i,
               uint64_t dispatch) {
    rlx_cpu_ctx ctx;
    ctx.dispatch = dispatch;
    memcpy(ctx.buffers, bufs, sizeof ctx.buffers);
    ctx.group_id = uint3{(uint)(i % gx), (uint)((i / gx) % gy), (uint)(i / ((uint64_t)gx * gy))};
    ctx.num_groups = uint3{gx, gy, gz};
    fn(&ctx);
}

// Guided claims: each takes half of its share of what is left (at least
// one group), so a job costs a few claims per thread, not one contended
// atomic per group (tens of thousands of softmax rows cost more in claims
// than in work), while the shrinking tail still balances the threads. A
// thread publishes what it ran once, when it leaves.
void take_groups(Pool *p) {
    const uint64_t total = p->total, split = 2 * p->parts;
    uint64_t mine = 0;
    uint64_t first = p->next.load(std::memory_order_relaxed);
    while (first < total) {
        const uint64_t last = first + std::max<uint64_t>(1, (total - first) / split);
        if (!p->next.compare_exchange_weak(first, last, std::memory_order_relaxed)) continue;
        for (uint64_t i = first; i < last; ++i) run_group(p->fn, p->bufs, p->gx, p->gy, p->gz, i, p->dispatch);
        mine += last - first;
        first = p->next.load(std::memory_order_relaxed);
    }
    if (mine) p->done.fetch_add(mine, std::memory_order_release);
}

void worker_main(Pool *p) {
    uint64_t seen = 0;
    for (;;) {
        for (int i = 0; i < kSpin && p->generation.load(std::memory_order_acquire) == seen; ++i) CPU_RELAX();
        if (p->generation.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lk(p->mu);
            // seq_cst increment then check, paired with publish(): either we
            // see the new generation or the publisher sees us sleeping.
            p->sleepers.fetch_add(1);
            p->cv.wait(lk, [&] { return p->stop || p->generation.load() != seen; });
            p->sleepers.fetch_sub(1);
            if (p->stop) return;
        }
        seen = p->generation.load(std::memory_order_acquire);
        // Join, then check the job is still open (Dekker pattern with the
        // closer in parallel_for): a late worker never reads a job that the
        // publisher is already rewriting.
        p->inside.fetch_add(1);
        if (p->open.load()) take_groups(p);
        p->inside.fetch_sub(1);
    }
}

void parallel_for(Pool *p, kernel_fn fn, void *const *bufs, const uint32_t g[3],
                  uint64_t dispatch = next_dispatch()) {
    p->fn = fn;
    memcpy(p->bufs, bufs, sizeof p->bufs);
    p->gx = g[0], p->gy = g[1], p->gz = g[2];
    p->total = (uint64_t)g[0] * g[1] * g[2];
    p->dispatch = dispatch;
    p->parts = (uint64_t)p->workers.size() + 1;
    p->next.store(0, std::memory_order_relaxed);
    p->done.store(0, std::memory_order_relaxed);
    p->open.store(true);
    p->generation.fetch_add(1);
    if (p->sleepers.load() > 0) {
        { std::lock_guard<std::mutex> lk(p->mu); }
        p->cv.notify_all();
    }
    take_groups(p);  // the executing thread works too
    spin_until([p] { return p->done.load(std::memory_order_acquire) >= p->total; });
    p->open.store(false);
    spin_until([p] { return p->inside.load() == 0; });
}

}  // namespace
