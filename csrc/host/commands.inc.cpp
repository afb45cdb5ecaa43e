// Command buffers (recording) and gemm: BLAS or the fallback, small-M, bf16 weights.
// A part of the host shim: csrc/host/shim.cpp includes it (one translation unit, every
// function in an anonymous namespace); it is not compiled on its own.

namespace {

// ---- command buffers: recording -------------------------------------------------------------
#define CB_CHECK(cb, fn)                                                                  \
    do {                                                                                  \
        ARG_CHECK(cb, fn ": command buffer is NULL");                                     \
        ARG_CHECK(cb->state.load(std::memory_order_relaxed) == CB_RECORDING,              \
                  fn ": command buffer was already committed");                           \
    } while (0)

rlx_status cmd_begin(rlx_device *d, rlx_cmdbuf **out) {
    ARG_CHECK(d && out, "cmd_begin: NULL argument");
    {
        std::lock_guard<std::mutex> lk(d->spare_mu);
        if (!d->spare.empty()) {
            *out = d->spare.back();
            d->spare.pop_back();
            return RLX_OK;
        }
    }
    *out = new rlx_cmdbuf;
    (*out)->dev = d;
    return RLX_OK;
}

rlx_status cmd_set_pipeline(rlx_cmdbuf *cb, rlx_pipeline *p) {
    CB_CHECK(cb, "cmd_set_pipeline");
    ARG_CHECK(p, "cmd_set_pipeline: pipeline is NULL");
    ARG_CHECK(p->lib->dev == cb->dev, "cmd_set_pipeline: pipeline belongs to another device");
    cb->pipe = p;
    return RLX_OK;
}

RLX_DEFINE_CHECK_BINDING()

rlx_status cmd_set_buffer(rlx_cmdbuf *cb, uint32_t index, rlx_buffer *b, uint64_t offset) {
    CB_CHECK(cb, "cmd_set_buffer");
    if (rlx_status s = check_binding(cb->dev, "cmd_set_buffer", index, b, offset)) return s;
    cb->bind[index] = b->ptr + offset;
    return RLX_OK;
}

rlx_status cmd_set_bytes(rlx_cmdbuf *cb, uint32_t index, const void *data, uint32_t size) {
    CB_CHECK(cb, "cmd_set_bytes");
    ARG_CHECK(index < RLX_MAX_BINDINGS, "cmd_set_bytes: binding index %u >= %u", index, RLX_MAX_BINDINGS);
    ARG_CHECK(data && size >= 1 && size <= kMaxBytes, "cmd_set_bytes: need 1..%u bytes of non-NULL data, got %u",
              kMaxBytes, size);
    cb->bytes.emplace_back(new uint8_t[size]);  // new[] is aligned for any params struct
    memcpy(cb->bytes.back().get(), data, size);
    cb->bind[index] = cb->bytes.back().get();
    return RLX_OK;
}

rlx_status check_grid(const char *fn, const uint32_t groups[3], const uint32_t threads[3]) {
    ARG_CHECK(groups, "%s: groups is NULL", fn);
    ARG_CHECK(groups[0] && groups[1] && groups[2], "%s: groups (%u, %u, %u) contain 0", fn, groups[0], groups[1],
              groups[2]);
    ARG_CHECK((uint64_t)groups[0] * groups[1] * groups[2] <= UINT32_MAX, "%s: more than 2^32-1 groups", fn);
    // Threads per group are ignored (groups run with one thread) but checked,
    // so a schedule that the GPUs would reject fails here too.
    if (threads)
        ARG_CHECK(threads[0] && threads[1] && threads[2] && (uint64_t)threads[0] * threads[1] * threads[2] <= 1024,
                  "%s: threads per group (%u, %u, %u) must be 1..1024 in total", fn, threads[0], threads[1],
                  threads[2]);
    return RLX_OK;
}

rlx_status push(rlx_cmdbuf *cb, const Cmd &c) {
    cb->cmds.push_back(c);
    return RLX_OK;
}

rlx_status cmd_dispatch(rlx_cmdbuf *cb, const uint32_t groups[3], const uint32_t threads[3]) {
    CB_CHECK(cb, "cmd_dispatch");
    ARG_CHECK(cb->pipe, "cmd_dispatch: no pipeline set");
    if (rlx_status s = check_grid("cmd_dispatch", groups, threads)) return s;
    Cmd c{CMD_DISPATCH, {groups[0], groups[1], groups[2]}, cb->pipe->fn, {}, nullptr, 0, 0};
    memcpy(c.bufs, cb->bind, sizeof c.bufs);
    return push(cb, c);
}

rlx_status cmd_barrier(rlx_cmdbuf *cb) {
    CB_CHECK(cb, "cmd_barrier");
    return push(cb, Cmd{CMD_BARRIER, {}, nullptr, {}, nullptr, 0, 0});
}

// ---- gemm ---------------------------------------------------------------------

// Blocked fallback when no BLAS is loaded: op(B) is packed per block of 256
// columns so the inner loop is a contiguous axpy the compiler vectorizes.
void gemm_fallback(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    const int64_t NB = 256;
    std::vector<float> bp((size_t)std::max<int64_t>(k, 1) * NB), acc(NB);
    for (int64_t j0 = 0; j0 < n; j0 += NB) {
        const int64_t nb = std::min(NB, n - j0);
        for (int64_t p = 0; p < k; ++p)
            for (int64_t j = 0; j < nb; ++j)
                bp[p * nb + j] = tb ? B[(j0 + j) * ldb + p] : B[p * ldb + j0 + j];
        for (int64_t i = 0; i < m; ++i) {
            std::fill(acc.begin(), acc.begin() + nb, 0.0f);
            for (int64_t p = 0; p < k; ++p) {
                const float a = ta ? A[p * lda + i] : A[i * lda + p];
                const float *b = &bp[p * nb];
                for (int64_t j = 0; j < nb; ++j) acc[j] += a * b[j];
            }
            float *c = C + i * ldc + j0;
            for (int64_t j = 0; j < nb; ++j)  // beta == 0 never reads C (BLAS semantics)
                c[j] = alpha * acc[j] + (beta == 0.0f ? 0.0f : beta * c[j]);
        }
    }
}

void sgemm_1(rlx_device *d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
             int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (d->sgemm)  // 101 CblasRowMajor, 111 CblasNoTrans, 112 CblasTrans
        d->sgemm(101, ta ? 112 : 111, tb ? 112 : 111, (int)m, (int)n, (int)k, alpha, A, (int)lda, B,
                 (int)ldb, beta, C, (int)ldc);
    else
        gemm_fallback(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The BLAS runs single-threaded and the device's own pool splits a gemm
// into row (or column) blocks, one BLAS call each: two thread pools on the
// same cores (the BLAS's and ours) spin against each other, which measured
// here as gemms 10-100x slower than either alone. Below kSplitMinWork
// (m*n*k) one call on the executing thread is cheaper than waking the pool.
constexpr int64_t kSplitMinWork = int64_t(1) << 18;

struct GemmSplit {
    rlx_device *d;
    bool ta, tb, along_m;
    int64_t m, n, k, lda, ldb, ldc, chunk;
    float alpha, beta;
    const float *A, *B;
    float *C;
};

void gemm_block(const rlx_cpu_ctx *ctx) {
    const GemmSplit &s = *(const GemmSplit *)ctx->buffers[0];
    const int64_t i0 = (int64_t)ctx->group_id.x * s.chunk;
    const int64_t len = std::min(s.chunk, (s.along_m ? s.m : s.n) - i0);
    if (len <= 0) return;
    if (s.along_m)  // rows i0.. of C come from rows i0.. of op(A)
        sgemm_1(s.d, s.ta, s.tb, len, s.n, s.k, s.alpha, s.ta ? s.A + i0 : s.A + i0 * s.lda, s.lda, s.B, s.ldb,
                s.beta, s.C + i0 * s.ldc, s.ldc);
    else            // columns i0.. of C come from columns i0.. of op(B)
        sgemm_1(s.d, s.ta, s.tb, s.m, len, s.k, s.alpha, s.A, s.lda, s.tb ? s.B + i0 * s.ldb : s.B + i0, s.ldb,
                s.beta, s.C + i0, s.ldc);
}

#ifdef RLX_HAVE_SMALL_M
struct SmallMJob {
    int64_t m, n, k, lda, ldb, ldc, chunk;
    float alpha, beta;
    const float *A;
    const void *B;
    void *C;
    enum Types { F32, F16, BF16 } types;  // F32: B and C f32; F16: both f16; BF16: B bf16, C f32 (A is f32)
    int level;  // rlx_device::small_m: 2 the AVX-512 kernel, 1 the AVX2 one (x86-64); 1 NEON (ARM64)
    bool packed() const;
    // Rows a group takes: kMaxRows for the dot form, kPackedPanelRows for
    // the packed-panel form (which packs a block of B once for all of them).
    int64_t panel_rows() const;
};

// One group's columns, in the instruction set the job names (small_m_columns
// is instantiated per namespace; the kernel's own target attributes apply inside).
template <typename TB, typename TC>
void small_m_columns(const SmallMJob &s, int64_t n0, int64_t n1) {
#if defined(RLX_HAVE_X86_TARGETS)
    if (s.level == 2)
        rlx_small_m::avx512::columns(s.m, n0, n1, s.k, s.alpha, s.A, s.lda, (const TB *)s.B, s.ldb, s.beta,
                                     (TC *)s.C, s.ldc);
    else
        rlx_small_m::avx2::columns(s.m, n0, n1, s.k, s.alpha, s.A, s.lda, (const TB *)s.B, s.ldb, s.beta,
                                   (TC *)s.C, s.ldc);
#else
    rlx_small_m::neon::columns(s.m, n0, n1, s.k, s.alpha, s.A, s.lda, (const TB *)s.B, s.ldb, s.beta, (TC *)s.C,
                               s.ldc);
#endif
}

// The packed-panel form (host_small_m_packed_body.h) for f32 products on
// x86-64, in panels of kPackedPanelRows rows (A's panel stays in L2 while
// a block of B is packed for it). Its register tile beats the dot form,
// which re-reads A from L2 for every 4 columns, from 16 rows at the AVX-512
// level (8 x 32 tile) and from 64 at the AVX2 one (6 x 16), and matches or
// beats the BLAS, which packs all of B into memory first, up to 256 rows at
// the AVX-512 level (benchmarks/README.md, "CPU: the packed small-M form";
// at AVX2 only the dot form's range, 128 rows, was measured: no AVX2-only
// machine's BLAS to compare with).
constexpr int64_t kPackedPanelRows = 128;
constexpr int64_t kPackedMinRows[3] = {0, 64, 16}, kPackedMaxRows[3] = {0, 128, 256};   // by level
bool SmallMJob::packed() const {
#if defined(RLX_HAVE_X86_TARGETS)
    return types == F32 && level >= 1 && level <= 2 && m >= kPackedMinRows[level] && m <= kPackedMaxRows[level];
#else
    return false;
#endif
}

// Rows past the kernel's kMaxRows run as panels of at most kMaxRows rows:
// group = column block * panels + panel, so a worker's run of consecutive
// groups takes one block of B through all its panels while that block is
// in its cache. Measured on a 2-core AVX-512 Xeon (benchmarks/README.md,
// "CPU: small-M panels"), two 64-row panels ran 128-row products at
// 160-200 GFLOP/s where the BLAS, called with the 64 rows each worker
// takes, ran 96-120; from 192 rows the BLAS is faster again.
constexpr int64_t kSmallMPanelRows = 2 * rlx_small_m::kMaxRows;

int64_t SmallMJob::panel_rows() const { return packed() ? kPackedPanelRows : rlx_small_m::kMaxRows; }

// Whether the small-M kernel takes an m-row product (either form).
bool small_m_takes(const SmallMJob &job) {
    return job.m <= kSmallMPanelRows || job.packed();
}

void small_m_part(const rlx_cpu_ctx *ctx) {
    const SmallMJob &s = *(const SmallMJob *)ctx->buffers[0];
    const int64_t rows = s.panel_rows(), panels = (s.m + rows - 1) / rows;
    const int64_t block = (int64_t)ctx->group_id.x / panels, panel = (int64_t)ctx->group_id.x % panels;
    const int64_t n0 = block * s.chunk, n1 = std::min(s.n, n0 + s.chunk);
    const int64_t r0 = panel * rows;
    SmallMJob p = s;
    p.m = std::min(rows, s.m - r0);
    p.A = s.A + r0 * s.lda;
    p.C = (uint8_t *)s.C + r0 * s.ldc * (s.types == SmallMJob::F16 ? 2 : 4);   // C is f16 or f32
#if defined(RLX_HAVE_X86_TARGETS)
    if (s.packed()) {
        const float *B = (const float *)p.B;
        float *C = (float *)p.C;
        if (s.level == 2)
            rlx_small_m::avx512::packed_columns(p.m, n0, n1, p.k, p.alpha, p.A, p.lda, B, p.ldb, p.beta, C, p.ldc);
        else
            rlx_small_m::avx2::packed_columns(p.m, n0, n1, p.k, p.alpha, p.A, p.lda, B, p.ldb, p.beta, C, p.ldc);
        return;
    }
#endif
    switch (p.types) {
        case SmallMJob::F16: small_m_columns<uint16_t, uint16_t>(p, n0, n1); break;
        case SmallMJob::BF16: small_m_columns<rlx_small_m::bf16, float>(p, n0, n1); break;
        default: small_m_columns<float, float>(p, n0, n1); break;
    }
}

// Runs the small-M kernel over column blocks (and row panels) on the device's pool.
void small_m(rlx_device *d, const SmallMJob &request) {
    SmallMJob job = request;
    const int64_t panels = (job.m + job.panel_rows() - 1) / job.panel_rows();
    // The packed form takes all of a panel's rows per group, so a product
    // with few columns has few groups (384 columns: 6): on many workers
    // narrow the column blocks, down to one packed panel's width, until
    // every worker has about two groups.
#if defined(RLX_HAVE_X86_TARGETS)
    const int64_t narrowest = job.level == 2 ? rlx_small_m::avx512::kPackCols : rlx_small_m::avx2::kPackCols;
    while (job.packed() && job.chunk > narrowest && (job.n + job.chunk - 1) / job.chunk * panels < 2 * d->threads)
        job.chunk /= 2;
#endif
    const uint32_t g[3] = {(uint32_t)((job.n + job.chunk - 1) / job.chunk * panels), 1, 1};
    if (d->threads < 2 || g[0] == 1) {
        rlx_cpu_ctx ctx{};
        ctx.buffers[0] = (void *)&job;
        for (uint32_t i = 0; i < g[0]; ++i) {
            ctx.group_id = uint3{i, 0, 0};
            small_m_part(&ctx);
        }
        return;
    }
    void *bufs[RLX_MAX_BINDINGS] = {(void *)&job};
    parallel_for(&d->pool, small_m_part, bufs, g);
}
#endif

void sgemm(rlx_device *d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
#ifdef RLX_HAVE_SMALL_M
    if (d->small_m && !ta && tb && k >= 16) {   // see host_small_m.h
        const SmallMJob job{m, n, k, lda, ldb, ldc, 64, alpha, beta, A, B, C, SmallMJob::F32, d->small_m};
        if (small_m_takes(job)) {
            small_m(d, job);
            return;
        }
    }
#endif
    const int64_t parts = d->threads;
    if (parts < 2 || m * n * k < kSplitMinWork || (m < 2 * parts && n < 16 * parts)) {
        sgemm_1(d, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    // Few rows (decode, short batches): split the columns, so each worker
    // streams its own part of B (the weights) once instead of all of it.
    GemmSplit s{d, ta, tb, m >= 32 * parts || n < 16 * parts, m, n, k, lda, ldb, ldc, 0, alpha, beta, A, B, C};
    // Column blocks stay multiples of 16 so each call keeps full vector tiles.
    s.chunk = s.along_m ? (m + parts - 1) / parts : ((n + parts - 1) / parts + 15) / 16 * 16;
    void *bufs[RLX_MAX_BINDINGS] = {&s};
    const uint32_t g[3] = {(uint32_t)(((s.along_m ? m : n) + s.chunk - 1) / s.chunk), 1, 1};
    parallel_for(&d->pool, gemm_block, bufs, g);
}

// ---- f32 A x bf16 B -> f32 C (precision="bf16" weights; csrc/host_bf16.h) --------
#ifdef RLX_HAVE_BF16_KERNELS
struct Bf16Job {
    const rlx_gemm_desc *g;
    const float *A;
    const uint16_t *B;
    float *C;
    uint32_t *ap;        // A rounded to bf16 pairs
    const float *bias;   // the desc's bias (f32, added in the kernels' stores), or NULL
    int64_t ldp, chunk;  // pair words per row; rows (rounding) or columns (small M) per group
    rlx_bf16::big::Gemm big;
};

void bf16_round_part(const rlx_cpu_ctx *ctx) {
    const Bf16Job &j = *(const Bf16Job *)ctx->buffers[0];
    const int64_t r0 = (int64_t)ctx->group_id.x * j.chunk, r1 = std::min(j.g->m, r0 + j.chunk);
    rlx_bf16::round_rows(r0, r1, j.g->k, j.A, j.g->lda, j.ap, j.ldp);
}

void bf16_small_part(const rlx_cpu_ctx *ctx) {
    const Bf16Job &j = *(const Bf16Job *)ctx->buffers[0];
    const rlx_gemm_desc &g = *j.g;
    const int64_t n0 = (int64_t)ctx->group_id.x * j.chunk, n1 = std::min(g.n, n0 + j.chunk);
    rlx_bf16::small::columns(g.m, n0, n1, g.k, g.alpha, j.ap, j.ldp, j.B, g.ldb, g.beta, j.C, g.ldc, j.bias);
}

void bf16_big_task(const rlx_cpu_ctx *ctx) {
    const Bf16Job &j = *(const Bf16Job *)ctx->buffers[0];
    thread_local std::vector<uint32_t> packed_b;
    rlx_bf16::big::run_task(j.big, (int64_t)ctx->group_id.x, packed_b);
}

// fn over groups [0, count): on the pool when `split` (not inside a worker), else here.
void bf16_run(rlx_device *d, bool split, kernel_fn fn, Bf16Job *job, int64_t count) {
    if (!split || d->threads < 2 || count == 1) {
        rlx_cpu_ctx ctx{};
        ctx.buffers[0] = (void *)job;
        for (int64_t i = 0; i < count; ++i) {
            ctx.group_id = uint3{(uint)i, 0, 0};
            fn(&ctx);
        }
        return;
    }
    void *bufs[RLX_MAX_BINDINGS] = {(void *)job};
    const uint32_t g[3] = {(uint32_t)count, 1, 1};
    parallel_for(&d->pool, fn, bufs, g);
}
#endif

// True when gemm_bf16 runs the AVX-512 BF16 kernels for g, which also add
// g.bias (so run_gemm_one must not add it again).
bool bf16_kernels_take(const rlx_device *d, const rlx_gemm_desc &g) {
#ifdef RLX_HAVE_BF16_KERNELS
    return g.b_dtype == RLX_DTYPE_BF16 && d->bf16_level >= 2 && !g.trans_a && g.k > 0;
#else
    (void)d, (void)g;
    return false;
#endif
}

void gemm_bf16(rlx_device *d, const rlx_gemm_desc &g, const float *A, const uint16_t *B, float *C, bool split) {
#ifdef RLX_HAVE_BF16_KERNELS
    if (bf16_kernels_take(d, g)) {
        Bf16Job job{&g, A, B, C, nullptr, g.bias ? (const float *)(g.bias->ptr + g.bias_offset) : nullptr, 0, 0, {}};
        job.ldp = ((g.k + 1) / 2 + 15) / 16 * 16;
        thread_local std::vector<uint32_t> rounded_a;
        rounded_a.resize((size_t)(g.m * job.ldp));
        job.ap = rounded_a.data();
        job.chunk = std::max<int64_t>(64, (g.m + 2 * d->threads - 1) / (2 * d->threads));
        bf16_run(d, split && g.m * g.k >= (1 << 16), bf16_round_part, &job, (g.m + job.chunk - 1) / job.chunk);
        if (g.trans_b && g.m <= rlx_bf16::small::kMaxRows) {
            job.chunk = 16;   // columns per group (4 tiles): B streams once, split over the pool
            bf16_run(d, split, bf16_small_part, &job, (g.n + job.chunk - 1) / job.chunk);
            return;
        }
        job.big = rlx_bf16::big::Gemm{g.m, g.n, g.k, g.alpha, g.beta, job.ap, job.ldp, B, g.ldb, (bool)g.trans_b,
                                      C, g.ldc, 0, 0, job.bias};
        rlx_bf16::big::plan(job.big, split ? d->threads : 1);
        bf16_run(d, split, bf16_big_task, &job, rlx_bf16::big::tasks(job.big));
        return;
    }
#endif
#ifdef RLX_HAVE_SMALL_M
    // No BF16 instructions, few rows (AVX2, or AVX-512 without BF16): the
    // small-M kernel widens B in registers, so the weights stream at half the
    // bytes of f32 and are never widened in memory.
    if (d->small_m && split && !g.trans_a && g.trans_b && g.m <= kSmallMPanelRows && g.k >= 16) {
        small_m(d, SmallMJob{g.m, g.n, g.k, g.lda, g.ldb, g.ldc, 64, g.alpha, g.beta, A, B, C, SmallMJob::BF16,
                             d->small_m});
        return;
    }
#endif
    // Otherwise (no small-M kernel here, or many rows): widen B to f32 in memory, sgemm.
    const bool tb = g.trans_b;
    const uint64_t nb = rlx_gemm_span(tb ? g.n : g.k, tb ? g.k : g.n, g.ldb);
    thread_local std::vector<float> wide_b;
    wide_b.resize(nb);
    rlx_bf16::widen(B, wide_b.data(), nb);
    (split ? sgemm : sgemm_1)(d, g.trans_a, tb, g.m, g.n, g.k, g.alpha, A, g.lda, wide_b.data(), g.ldb, g.beta, C,
                              g.ldc);
}

// Product `index` of a (possibly two-level batched) gemm: entry index % batch
// of outer repeat index / batch.
void run_product(rlx_device *d, const rlx_gemm_desc &g, int64_t index, bool split) {
    const bool ta = g.trans_a, tb = g.trans_b;
    const int64_t i = index % rlx_gemm_batch(&g), j = index / rlx_gemm_batch(&g);
    uint8_t *a = g.a->ptr + g.a_offset + (uint64_t)(i * g.stride_a + j * g.outer_stride_a) * rlx_dtype_size(g.dtype);
    uint8_t *b = g.b->ptr + g.b_offset + (uint64_t)(i * g.stride_b + j * g.outer_stride_b) * rlx_dtype_size(g.b_dtype);
    uint8_t *c = g.c->ptr + g.c_offset + (uint64_t)(i * g.stride_c + j * g.outer_stride_c) * rlx_dtype_size(g.c_dtype);
    auto gemm = split ? sgemm : sgemm_1;
    if (g.b_dtype == RLX_DTYPE_BF16) {   // f32 A and C: the one bf16 combination (kExtraGemmTypes)
        gemm_bf16(d, g, (const float *)a, (const uint16_t *)b, (float *)c, split);
        return;
    }
    if (rlx_gemm_uniform(&g) && g.dtype == RLX_DTYPE_F32) {
        gemm(d, ta, tb, g.m, g.n, g.k, g.alpha, (const float *)a, g.lda, (const float *)b, g.ldb, g.beta,
             (float *)c, g.ldc);
        return;
    }
    const bool c_f16 = g.c_dtype == RLX_DTYPE_F16;
#ifdef RLX_HAVE_SMALL_M
    // Few rows against f16 weights: widen only A (m x k, small) and stream B
    // as f16, half the bytes of f32 weights.
    // (split: not already inside a pool worker, which may not start another job)
    if (d->small_m && c_f16 && split && !ta && tb && g.m <= kSmallMPanelRows && g.k >= 16) {
        thread_local std::vector<float> wide_a;
        wide_a.resize((size_t)(g.m * g.k));
        for (int64_t r = 0; r < g.m; ++r)
            for (int64_t p = 0; p < g.k; ++p) wide_a[r * g.k + p] = (float)((const half *)a)[r * g.lda + p];
        small_m(d, SmallMJob{g.m, g.n, g.k, g.k, g.ldb, g.ldc, 64, g.alpha, g.beta, wide_a.data(), b, c,
                             SmallMJob::F16, d->small_m});
        return;
    }
#endif
    // f16 A and B: widen both (and C when beta reads it) to f32, sgemm, then
    // narrow the m x n block of C when C is f16 (an f32 C is written in place).
    // Accumulation is f32 as the ABI requires.
    const uint64_t na = rlx_gemm_span(ta ? g.k : g.m, ta ? g.m : g.k, g.lda);
    const uint64_t nb = rlx_gemm_span(tb ? g.n : g.k, tb ? g.k : g.n, g.ldb), nc = rlx_gemm_span(g.m, g.n, g.ldc);
    thread_local std::vector<float> scratch;
    scratch.resize(na + nb + (c_f16 ? nc : 0));
    float *fa = scratch.data(), *fb = fa + na, *fc = c_f16 ? fb + nb : (float *)c;
    for (uint64_t e = 0; e < na; ++e) fa[e] = (float)((const half *)a)[e];
    for (uint64_t e = 0; e < nb; ++e) fb[e] = (float)((const half *)b)[e];
    if (c_f16 && g.beta != 0.0f)
        for (uint64_t e = 0; e < nc; ++e) fc[e] = (float)((const half *)c)[e];
    gemm(d, ta, tb, g.m, g.n, g.k, g.alpha, fa, g.lda, fb, g.ldb, g.beta, fc, g.ldc);
    if (c_f16)
        for (int64_t r = 0; r < g.m; ++r)
            for (int64_t col = 0; col < g.n; ++col) ((half *)c)[r * g.ldc + col] = (half)fc[r * g.ldc + col];
}

// The product, then the bias on each of its rows while they are still in cache.
void run_gemm_one(rlx_device *d, const rlx_gemm_desc &g, int64_t index, bool split) {
    run_product(d, g, index, split);
    if (!g.bias || bf16_kernels_take(d, g)) return;   // those kernels add it as they store
    const int64_t i = index % rlx_gemm_batch(&g), j = index / rlx_gemm_batch(&g);
    const uint64_t esz = rlx_dtype_size(g.c_dtype);
    uint8_t *c = g.c->ptr + g.c_offset + (uint64_t)(i * g.stride_c + j * g.outer_stride_c) * esz;
    const uint8_t *bias = g.bias->ptr + g.bias_offset;
    for (int64_t r = 0; r < g.m; ++r) {
        if (g.c_dtype == RLX_DTYPE_F32) {
            float *row = (float *)c + r * g.ldc;
            for (int64_t col = 0; col < g.n; ++col) row[col] += ((const float *)bias)[col];
        } else {
            half *row = (half *)c + r * g.ldc;
            for (int64_t col = 0; col < g.n; ++col)
                row[col] = (half)((float)row[col] + (float)((const half *)bias)[col]);
        }
    }
}

struct GemmBatch { rlx_device *d; const rlx_gemm_desc *g; };

void gemm_batch_entry(const rlx_cpu_ctx *ctx) {
    const GemmBatch &b = *(const GemmBatch *)ctx->buffers[0];
    run_gemm_one(b.d, *b.g, (int64_t)ctx->group_id.x, false);
}

void run_gemm(rlx_device *d, const rlx_gemm_desc &g) {
    if (g.m == 0 || g.n == 0) return;
    const int64_t entries = rlx_gemm_batch(&g) * rlx_gemm_outer(&g);
    if (entries == 1 || d->threads < 2) {
        for (int64_t i = 0; i < entries; ++i) run_gemm_one(d, g, i, entries == 1);
        return;
    }
    // Whole products per worker: no splitting inside one, no second pool.
    GemmBatch job{d, &g};
    void *bufs[RLX_MAX_BINDINGS] = {&job};
    const uint32_t groups[3] = {(uint32_t)entries, 1, 1};
    parallel_for(&d->pool, gemm_batch_entry, bufs, groups);
}

// Optional operand types: f16 inputs with an f32 result (attention scores).
const int32_t kExtraGemmTypes[][3] = {{RLX_DTYPE_F16, RLX_DTYPE_F16, RLX_DTYPE_F32},
                                      {RLX_DTYPE_F32, RLX_DTYPE_BF16, RLX_DTYPE_F32}};

RLX_DEFINE_CHECK_GEMM(, "host", kExtraGemmTypes, 2)

rlx_status cmd_gemm(rlx_cmdbuf *cb, const rlx_gemm_desc *desc) {
    CB_CHECK(cb, "cmd_gemm");
    if (rlx_status s = check_gemm(cb->dev, desc)) return s;
    cb->gemms.push_back(*desc);
    return push(cb, Cmd{CMD_GEMM, {}, nullptr, {}, nullptr, (uint32_t)cb->gemms.size() - 1, 0});
}

}  // namespace
