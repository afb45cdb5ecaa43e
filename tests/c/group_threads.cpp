// The sort, scan, splat, FFT and fused norm kernels (shaders/sort.h, shaders/splat.h,
// fft_shared and fft_mixed of shaders/fft.h,
// rmsnorm_add of shaders/norm.h, rmsnorm_rope of shaders/rope.h, gemv1n's
// norm-chain staging of shaders/quant_gemv.h) run with G
// real threads per group on the CPU: the CPU prelude with its one-thread
// group macros replaced by a pool of G pthreads that share the group's
// memory (RLX_SHARED becomes a static array: groups run one after another)
// and meet at a pthread barrier (rlx_barrier). So the GPU branches of these
// kernels (more than one thread per group: the sort's vote-ranked
// histogram and scatter, with SIMD groups emulated below; the scans'
// per-thread segments, the raster's pixel ownership) execute here, with the
// same barriers a GPU would need; a missing barrier or a shared write by two
// threads shows up as a wrong result (not reliably: a race may not fire).
// tests/ops/test_splat_group_threads.py and test_norm_group_threads.py build
// this as a shared library and compare with rlx/reference. The host
// orchestration mirrors rlx/lowering/{sort,splat,norm,rope}.py. The group
// reductions (rlx_group_sum) become a sum over per-thread partials between
// two barriers, so a kernel that reduces in only some threads of a group
// deadlocks here instead of passing. Group-memory atomic adds
// (rlx_group_atomic_add) are real atomics here.
#include <pthread.h>
#include <stdlib.h>
#include <vector>

#include "prelude/cpu.h"

#undef rlx_local_id
#undef rlx_group_size
#undef RLX_SHARED
#undef rlx_barrier
#undef RLX_FOR_GROUP
#undef RLX_FOR_RANGE
#undef rlx_group_atomic_add
#undef rlx_simd_lane
#undef rlx_simd_id
#undef rlx_simd_width
#undef rlx_simd_barrier

static thread_local uint rlx_gt_local;
static uint rlx_gt_size = 1;
static pthread_barrier_t rlx_gt_barrier;

#define rlx_local_id (uint3{rlx_gt_local, 0u, 0u})
#define rlx_group_size (uint3{rlx_gt_size, 1u, 1u})
#define RLX_SHARED(type, name, count) static type name[count]
#define rlx_barrier() pthread_barrier_wait(&rlx_gt_barrier)
#define rlx_group_atomic_add(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define RLX_FOR_GROUP(i, n) for (uint i = rlx_gt_local; i < (uint)(n); i += rlx_gt_size)
#define RLX_FOR_RANGE(i, n)                                                                \
    for (uint64_t i = (uint64_t)rlx_group_id.x * rlx_gt_size + rlx_gt_local; i < (uint64_t)(n); \
         i += (uint64_t)rlx_num_groups.x * rlx_gt_size)

// Every thread writes its partial, all meet, every thread sums them in
// thread order, all meet again (so the next reduction cannot overwrite a
// partial another thread has still to read).
static float rlx_gt_partials[1024];
static float rlx_gt_group_sum(float v, float *scratch) {
    (void)scratch;
    rlx_gt_partials[rlx_gt_local] = v;
    pthread_barrier_wait(&rlx_gt_barrier);
    float s = 0.0f;
    for (uint t = 0; t < rlx_gt_size; ++t) s += rlx_gt_partials[t];
    pthread_barrier_wait(&rlx_gt_barrier);
    return s;
}
#define rlx_group_sum rlx_gt_group_sum

// SIMD groups of rlx_gt_width consecutive threads (gt_simd_width; 1 by
// default, as the CPU prelude has it). Wider ones emulate the votes the
// sort's histogram and scatter rank with: every thread of the group posts its vote and
// reads its SIMD group's between two group barriers, so the kernel must call
// rlx_simd_match and rlx_simd_barrier in every thread of the group together
// (its calls are group-uniform); a SIMD-group barrier is a group barrier.
static uint rlx_gt_width = 1;
#define rlx_simd_width rlx_gt_width
#define rlx_simd_lane (rlx_gt_local % rlx_gt_width)
#define rlx_simd_id (rlx_gt_local / rlx_gt_width)
static void rlx_gt_simd_barrier() {
    if (rlx_gt_width > 1u) pthread_barrier_wait(&rlx_gt_barrier);
}
#define rlx_simd_barrier rlx_gt_simd_barrier
static uint rlx_gt_votes[1024];
static bool rlx_gt_voted[1024];
static rlx_lanes rlx_gt_simd_match(uint value, uint bits, bool valid) {
    if (rlx_gt_width == 1u) return valid ? 1u : 0u;
    const uint keep = bits >= 32u ? ~0u : (1u << bits) - 1u;
    rlx_gt_votes[rlx_gt_local] = value & keep;
    rlx_gt_voted[rlx_gt_local] = valid;
    pthread_barrier_wait(&rlx_gt_barrier);
    const uint first = rlx_gt_local - rlx_gt_local % rlx_gt_width;
    const uint last = first + rlx_gt_width < rlx_gt_size ? first + rlx_gt_width : rlx_gt_size;
    rlx_lanes peers = 0u;
    for (uint t = first; valid && t < last; ++t)
        if (rlx_gt_voted[t] && rlx_gt_votes[t] == (value & keep)) peers |= (rlx_lanes)1u << (t - first);
    pthread_barrier_wait(&rlx_gt_barrier);
    return peers;
}
#define rlx_simd_match rlx_gt_simd_match
// The SIMD prefix sum as the votes: every thread posts its value between two
// group barriers and adds those of its SIMD group's lanes before it.
static uint rlx_gt_values[1024];
static uint rlx_gt_simd_prefix_exclusive_sum(uint v) {
    if (rlx_gt_width == 1u) return 0u;
    rlx_gt_values[rlx_gt_local] = v;
    pthread_barrier_wait(&rlx_gt_barrier);
    uint before = 0u;
    for (uint t = rlx_gt_local - rlx_gt_local % rlx_gt_width; t < rlx_gt_local; ++t) before += rlx_gt_values[t];
    pthread_barrier_wait(&rlx_gt_barrier);
    return before;
}
#undef rlx_simd_prefix_exclusive_sum
#define rlx_simd_prefix_exclusive_sum rlx_gt_simd_prefix_exclusive_sum

#include "sort.h"
#include "splat.h"
#include "norm.h"
#include "rope.h"
#include "movement.h"   // quant.h reads its GatherParams
#include "quant.h"
#include "fft.h"

namespace {

struct Launch {
    uint groups;
    void (*body)(void *ctx, rlx_ids ids);
    void *ctx;
};

struct Worker {
    uint local;
    const Launch *launch;
};

void *worker_main(void *arg) {
    const Worker *w = static_cast<const Worker *>(arg);
    rlx_gt_local = w->local;
    for (uint g = 0; g < w->launch->groups; ++g) {
        rlx_ids ids{uint3{g, 0u, 0u}, uint3{w->launch->groups, 1u, 1u}, 0u};
        w->launch->body(w->launch->ctx, ids);
        pthread_barrier_wait(&rlx_gt_barrier);   // the group's shared memory is reused by the next
    }
    return nullptr;
}

// One dispatch: `groups` groups of `threads` threads, one group at a time.
void dispatch(uint groups, uint threads, void (*body)(void *, rlx_ids), void *ctx) {
    Launch launch{groups, body, ctx};
    rlx_gt_size = threads;
    pthread_barrier_init(&rlx_gt_barrier, nullptr, threads);
    std::vector<pthread_t> tids(threads);
    std::vector<Worker> workers(threads);
    for (uint t = 0; t < threads; ++t) {
        workers[t] = Worker{t, &launch};
        pthread_create(&tids[t], nullptr, worker_main, &workers[t]);
    }
    for (uint t = 0; t < threads; ++t) pthread_join(tids[t], nullptr);
    pthread_barrier_destroy(&rlx_gt_barrier);
}

struct ScanCtx {
    uint *data, *part;
    ScanParams p;
};

void scan_reduce_body(void *c, rlx_ids ids) {
    ScanCtx *s = static_cast<ScanCtx *>(c);
    scan_reduce<uint>(s->data, s->part, &s->p, ids);
}
void scan_partials_body(void *c, rlx_ids ids) {
    ScanCtx *s = static_cast<ScanCtx *>(c);
    scan_partials<uint>(s->part, &s->p, ids);
}
void scan_down_body(void *c, rlx_ids ids) {
    ScanCtx *s = static_cast<ScanCtx *>(c);
    scan_down<uint>(s->data, s->part, &s->p, ids);
}

// rlx/lowering/sort.py's emit_scan: data[0, n) in place, the total at
// data[total_at] when total_at >= 0.
void run_scan(uint *data, uint n, int total_at, uint groups, uint threads) {
    std::vector<uint> part(groups);
    ScanCtx c{data, part.data(), ScanParams{n, 0u, groups, total_at < 0 ? 0u : (uint)total_at, total_at >= 0,
                                            0u, 0u, 0u}};
    if (groups > 1u) {
        dispatch(groups, threads, scan_reduce_body, &c);
        dispatch(1, threads, scan_partials_body, &c);
    }
    dispatch(groups, threads, scan_down_body, &c);
}

struct SortCtx {
    const uint *src;
    const int *count;
    uint *hist;
    uint *dst;
    SortParams p;
};

void hist_body(void *c, rlx_ids ids) {
    SortCtx *s = static_cast<SortCtx *>(c);
    sort_histogram<uint>(s->src, s->count, s->hist, &s->p, ids);
}
void scatter_body(void *c, rlx_ids ids) {
    SortCtx *s = static_cast<SortCtx *>(c);
    sort_scatter<uint>(s->src, s->count, s->hist, s->dst, &s->p, ids);
}

// rlx/lowering/sort.py's passes: least significant digit first.
void run_sort(const uint *rec, uint n, uint cols, uint keys, uint bits, const int *count, uint blocks,
              uint scan_groups, uint threads, uint *out) {
    std::vector<uint> hist(256u * blocks), a((size_t)n * cols), b((size_t)n * cols);
    struct Pass { uint word, shift, mask; };
    std::vector<Pass> passes;
    for (int word = (int)keys - 1; word >= 0; --word) {
        const uint width = word == 0 ? bits : 32u;
        for (uint shift = 0; shift < width; shift += 8u) {
            const uint w = width - shift < 8u ? width - shift : 8u;
            passes.push_back(Pass{(uint)word, shift, (1u << w) - 1u});
        }
    }
    const uint *src = rec;
    for (size_t k = 0; k < passes.size(); ++k) {
        uint *dst = k + 1 == passes.size() ? out : (k % 2 ? b.data() : a.data());
        SortCtx c{src, count, hist.data(), dst,
                  SortParams{n, cols, 0u, 0u, count != nullptr, passes[k].word, passes[k].shift, passes[k].mask,
                             blocks, 0u, 0u, 0u}};
        static const int no_count = 0;
        if (!count) c.count = &no_count;
        dispatch(blocks, threads, hist_body, &c);
        run_scan(hist.data(), 256u * blocks, -1, scan_groups, threads);
        dispatch(blocks, threads, scatter_body, &c);
        src = dst;
    }
}

struct RenderCtx {
    const float *means, *scales, *quats, *opac, *sh, *cam;
    float *rec;
    int *keys, *order, *offsets, *pairs, *ranges, *count;
    uint *sorted;
    float *image;
    SplatProjectParams pp;
    SplatScanParams sp;
    SplatBinParams bp;
    SplatRangesParams rp;
    SplatRasterParams xp;
};

void project_body(void *c, rlx_ids ids) {
    RenderCtx *r = static_cast<RenderCtx *>(c);
    splat_project<float>(r->means, r->scales, r->quats, r->opac, r->sh, r->cam, r->rec, &r->pp, ids);
}
void keys_body(void *c, rlx_ids ids) {
    RenderCtx *r = static_cast<RenderCtx *>(c);
    splat_depth_keys<float>(r->rec, r->keys, &r->sp, ids);
}
void order_tiles_body(void *c, rlx_ids ids) {
    RenderCtx *r = static_cast<RenderCtx *>(c);
    splat_order_tiles<float>(r->rec, r->order, r->offsets, &r->sp, ids);
}
void bin_body(void *c, rlx_ids ids) {
    RenderCtx *r = static_cast<RenderCtx *>(c);
    splat_bin<float>(r->rec, r->order, r->offsets, r->pairs, &r->bp, ids);
}
void ranges_body(void *c, rlx_ids ids) {
    RenderCtx *r = static_cast<RenderCtx *>(c);
    splat_ranges<uint>(r->sorted, r->count, r->ranges, &r->rp, ids);
}
void raster_body(void *c, rlx_ids ids) {
    RenderCtx *r = static_cast<RenderCtx *>(c);
    splat_raster<float>(r->rec, (const int *)r->sorted, r->ranges, r->image, &r->xp, ids);
}

struct NormCtx {
    const float *o, *x, *w, *w_next;
    const int *pos;
    const float *inv_freq;
    float *y;
    RmsNormAddParams ap;
    RmsNormRopeParams rp;
};

void rmsnorm_add_body(void *c, rlx_ids ids) {
    NormCtx *n = static_cast<NormCtx *>(c);
    rmsnorm_add<float>(n->o, n->x, n->w, n->w_next, n->y, &n->ap, ids);
}
// gemv1n's x staging (rlx_q_stage_x_norm) alone: each group forms the
// chain into its tile, group 0 also into out; every group's tile is then
// read back un-swizzled into tiles[group].
struct StageCtx {
    const float *o, *r, *nw, *nw_next;
    float *out, *tiles;
    QuantGemvParams p;
};

void stage_x_norm_body(void *c, rlx_ids rlx_ids_arg) {
    StageCtx *s = static_cast<StageCtx *>(c);
    RLX_QGEMV1_TILE_false(float);
    RLX_SHARED(float, scratch, 32);
    const uint k = s->p.k, tid = rlx_local_id.x, nt = rlx_group_size.x;
    rlx_q_stage_x_norm<float>(s->o, s->r, s->nw, s->nw_next, s->out, rlx_group_id.x == 0u, xt, scratch, k, &s->p,
                              tid, nt);
    rlx_barrier();
    float *tile = s->tiles + (uint64_t)rlx_group_id.x * k;
    for (uint e = tid; e < k; e += nt) tile[e] = xt[(e >> 5u) * RLX_QXT_PITCH + rlx_q_xt_at(e >> 5u, e & 31u)];
    rlx_barrier();   // the next group reuses the tile
}

void rmsnorm_rope_body(void *c, rlx_ids ids) {
    NormCtx *n = static_cast<NormCtx *>(c);
    rmsnorm_rope<float>(n->x, n->pos, n->inv_freq, n->w, n->w_next, n->y, &n->rp, ids);
}

struct FftCtx {
    const float *src, *tw, *pre, *post;
    float *dst;
    const FftParams *p;
};

void fft_shared_body(void *c, rlx_ids rlx_ids_arg) {
    FftCtx *f = static_cast<FftCtx *>(c);
    fft_shared<float>(f->src, f->dst, f->tw, f->pre, f->post, f->p, rlx_ids_arg);
}

void fft_mixed_body(void *c, rlx_ids rlx_ids_arg) {
    FftCtx *f = static_cast<FftCtx *>(c);
    fft_mixed<float>(f->src, f->dst, f->tw, f->pre, f->post, f->p, rlx_ids_arg);
}

}  // namespace

extern "C" {

// One fft_shared dispatch (rlx/lowering/fft.py fft_params' FftParams): groups
// of `threads` threads; returns whether those groups take the register form.
__attribute__((visibility("default"))) int gt_fft_shared(const float *src, float *dst, const float *tw,
                                                         const float *pre, const float *post, const void *params,
                                                         uint groups, uint threads) {
    const FftParams *p = static_cast<const FftParams *>(params);
    FftCtx c{src, tw, pre, post, dst, p};
    dispatch(groups, threads, fft_shared_body, &c);
    return rlx_fft_register_form_applies(p->span, p->swizzle, p->group_rows, threads) && p->radix != 1u;
}

// One fft_mixed dispatch (GPUs' mixed-radix form in its own kernel).
__attribute__((visibility("default"))) void gt_fft_mixed(const float *src, float *dst, const float *tw,
                                                         const float *pre, const float *post, const void *params,
                                                         uint groups, uint threads) {
    FftCtx c{src, tw, pre, post, dst, static_cast<const FftParams *>(params)};
    dispatch(groups, threads, fft_mixed_body, &c);
}

// rmsnorm_add over dense rows (rlx/lowering/norm.py): y is [rows, cols], or
// with then_norm [2, rows, cols] (the normed sums, then the sums).
__attribute__((visibility("default"))) void gt_rmsnorm_add(const float *o, const float *x, const float *w,
                                                           const float *w_next, uint rows, uint cols, float eps,
                                                           float next_eps, uint add_one, uint next_add_one,
                                                           uint then_norm, uint threads, float *y) {
    NormCtx n{o, x, w, w_next, nullptr, nullptr, y,
              RmsNormAddParams{rows, cols, 0u, 0u, eps, next_eps, add_one, next_add_one, then_norm, 0u, 0u, 0u},
              RmsNormRopeParams{}};
    dispatch(rows, threads, rmsnorm_add_body, &n);
}

// gemv1n's staging of the norm chain (x_norm 1: the sums; 2: the normed
// sums) of one row of k (a multiple of 32) over `groups` groups: out [2k]
// as rmsnorm_add writes it (group 0 only), tiles [groups, k].
__attribute__((visibility("default"))) void gt_stage_x_norm(const float *o, const float *r, const float *nw,
                                                            const float *nw_next, uint k, float eps, float next_eps,
                                                            uint add_one, uint next_add_one, uint x_norm,
                                                            uint groups, uint threads, float *out, float *tiles) {
    StageCtx s{o, r, nw, nw_next, out, tiles, QuantGemvParams{}};
    s.p.m = 1u, s.p.k = k, s.p.x_norm = x_norm, s.p.eps = eps, s.p.next_eps = next_eps;
    s.p.add_one = add_one, s.p.next_add_one = next_add_one;
    dispatch(groups, threads, stage_x_norm_body, &s);
}

// rmsnorm_rope of a dense x [T, H, D] at positions [T] (rlx/lowering/rope.py),
// heads from weight_b_from normed by w_b.
__attribute__((visibility("default"))) void gt_rmsnorm_rope(const float *x, const int *pos, const float *inv_freq,
                                                            const float *w, const float *w_b, uint weight_b_from,
                                                            uint t, uint h, uint d, uint rotary_dim,
                                                            uint interleaved, float eps, uint add_one, uint threads,
                                                            float *y) {
    const uint half = rotary_dim / 2u;
    NormCtx n{nullptr, x, w, w_b, pos, inv_freq, y, RmsNormAddParams{},
              RmsNormRopeParams{t * h, half + (d - rotary_dim), t, h, d, half, interleaved, 0u, 0u, 0u, h * d, d,
                                0u, 0u, 1u, add_one, eps, weight_b_from, 0u, 0u}};
    dispatch(t * h, threads, rmsnorm_rope_body, &n);
}

// SIMD groups of `width` threads for the dispatches that follow (1: the
// default, every thread its own).
__attribute__((visibility("default"))) void gt_simd_width(uint width) { rlx_gt_width = width; }

// Rows [0, min(count, n)) of rec [n, cols] sorted into out (count < 0: n).
__attribute__((visibility("default"))) void gt_sort(const int *rec, uint n, uint cols, uint keys, uint bits,
                                                    int count, uint blocks, uint scan_groups, uint threads,
                                                    int *out) {
    const int c = count;
    run_sort((const uint *)rec, n, cols, keys, bits, count < 0 ? nullptr : &c, blocks, scan_groups, threads,
             (uint *)out);
}

// data[0, n) becomes its exclusive prefix sum in place, data[n] the total.
__attribute__((visibility("default"))) void gt_scan(int *data, uint n, uint groups, uint threads) {
    run_scan((uint *)data, n, (int)n, groups, threads);
}

// The renderer's stages (rlx/splat/renderer.py's graph) at `threads` per
// group, scans over `scan_groups` groups; returns the pairs the frame
// needed (image [h, w, 5] is valid when that is <= capacity). The records
// ([n, 16]), order ([n, 2]) and sorted pairs ([capacity, 2]) come back too.
__attribute__((visibility("default"))) int gt_render(const float *means, const float *scales, const float *quats,
                                                     const float *opac, const float *sh, uint n, uint sh_k,
                                                     const float *cam, uint w, uint h, uint capacity,
                                                     float max_alpha, uint scan_groups, uint threads, float *image,
                                                     float *rec_out, int *order_out, int *pairs_out) {
    const uint gx = (w + 15u) / 16u, gy = (h + 15u) / 16u, tiles = gx * gy;
    std::vector<float> rec((size_t)n * 16u);
    std::vector<int> keys((size_t)n * 2u), order((size_t)n * 2u), offsets(n + 1u), pairs((size_t)capacity * 2u);
    std::vector<int> ranges(tiles * 2u);
    std::vector<uint> sorted((size_t)capacity * 2u);
    RenderCtx r{means, scales, quats, opac, sh, cam, rec.data(), keys.data(), order.data(), offsets.data(),
                pairs.data(), ranges.data(), &offsets[n], sorted.data(), image,
                SplatProjectParams{n, sh_k, w, h, gx, gy, 0u, 0u}, SplatScanParams{n, 0u, 0u, 0u},
                SplatBinParams{n, capacity, gx, 0u}, SplatRangesParams{capacity, 0u, tiles, 0u},
                SplatRasterParams{w, h, gx, 5u, 0.1f, 0.2f, 0.3f, max_alpha}};
    dispatch(3, threads, project_body, &r);
    dispatch(3, threads, keys_body, &r);
    run_sort((const uint *)keys.data(), n, 2u, 1u, 32u, nullptr, 3u, scan_groups, threads, (uint *)order.data());
    dispatch(3, threads, order_tiles_body, &r);
    run_scan((uint *)offsets.data(), n, (int)n, scan_groups, threads);
    dispatch(3, threads, bin_body, &r);
    uint bits = 1;
    while ((1u << bits) < tiles) ++bits;
    run_sort((const uint *)pairs.data(), capacity, 2u, 1u, bits, &offsets[n], 2u, scan_groups, threads,
             sorted.data());
    for (size_t i = 0; i < rec.size(); ++i) rec_out[i] = rec[i];
    for (size_t i = 0; i < order.size(); ++i) order_out[i] = order[i];
    for (size_t i = 0; i < sorted.size(); ++i) pairs_out[i] = (int)sorted[i];
    dispatch(2, threads, ranges_body, &r);
    dispatch(tiles, threads, raster_body, &r);
    return offsets[n];
}
}
