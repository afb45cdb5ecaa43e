// What the integer-x decode GEMVs share (host_quant_vnni.h and host_quant_q5_0_avx2.h on x86,
// host_quant_arm64.h on ARM64): the loop over weight rows and the kernel
// entry. Included by each form inside its translation unit's
// instruction-set region, after shaders/quant.h (QuantGemvParams,
// rlx_q_gemv_cpu).
#ifndef RLX_HOST_QUANT_INT_ROWS_H
#define RLX_HOST_QUANT_INT_ROWS_H

#include <string.h>

// Which x a thread's integer copy holds (each form's cache derives from
// it): the groups of one dispatch share x, so a thread converts it once per
// dispatch (rlx_ids::dispatch; the shim counts dispatches from 1, so 0 is
// "nothing cached", and a new dispatch converts again even at the same x).
// Its helpers are static (each instruction set's translation unit keeps its
// own copy): an inline member would be one symbol that the linker may take
// from any level's build.
struct RlxXKey {
    uint64_t dispatch = 0;
    const void *x = nullptr;
    uint m = 0, k = 0, stride = 0, group = 0;   // group: the ARM64 form's block; 0 elsewhere
};
static inline bool rlx_x_key_holds(const RlxXKey &have, const RlxXKey &want) {
    return want.dispatch != 0 && have.dispatch == want.dispatch && have.x == want.x && have.m == want.m &&
           have.k == want.k && have.stride == want.stride && have.group == want.group;
}
static inline void rlx_x_key_store(RlxXKey &have, const RlxXKey &want) { memcpy(&have, &want, sizeof have); }

// Whether a form's Dot also has run_pair(cache, wr, row_bytes, blocks, s):
// two consecutive weight rows' sums against one row of x (s[0], s[1]),
// each summed in the order run would sum it.
template <typename Dot, typename = void> struct RlxHasRowPairs {
    static constexpr bool value = false;
};
template <typename Dot> struct RlxHasRowPairs<Dot, decltype((void)&Dot::run_pair)> {
    static constexpr bool value = true;
};

// Whether a form's x cache has add_spikes(wr, s, rows): products of x
// elements kept out of its integer copy, added to each weight row's sums
// (csrc/host_quant_q5_0_pieces.h).
template <typename Cache, typename = void> struct RlxHasSpikes {
    static constexpr bool value = false;
};
template <typename Cache> struct RlxHasSpikes<Cache, decltype((void)&Cache::add_spikes)> {
    static constexpr bool value = true;
};

// Rows [j0, j1) of y = act(x W^T + bias) for the m rows of x: Dot::run
// gives a weight row's m sums (x row r's integer copy at cache row
// xrow[r]), or for one row of x Dot::run_pair two weight rows' sums where
// the form has it; the blocks are fetched ahead as rlx_q_gemv_cpu fetches
// them (rlx_q_prefetch_row), bias and activation are applied here.
template <typename Dot, typename T, typename Cache>
static inline void rlx_qint_rows(const Cache &cache, const uchar *w, uint64_t row_bytes, uint blocks, T *y,
                                 const T *bias, const QuantGemvParams *p, uint m, uint j0, uint j1) {
    uint xrow[RLX_QGEMV_MAX_M];
    for (uint r = 0; r < RLX_QGEMV_MAX_M; ++r) xrow[r] = r < m ? r : m - 1u;
    const uint64_t ahead = rlx_q_prefetch_distance(row_bytes);
    const auto emit = [&](uint j, float *s, uint rows) {
        if constexpr (RlxHasSpikes<Cache>::value) cache.add_spikes(w + (uint64_t)j * row_bytes, s, rows);
        const float bv = p->has_bias ? rlx_to_float(bias[j]) : 0.0f;
        for (uint r = 0; r < rows; ++r)
            y[(uint64_t)r * p->y_stride + j] = rlx_from_float<T>(rlx_activation(p->act, s[r] + bv));
    };
    uint j = j0;
    if constexpr (RlxHasRowPairs<Dot>::value) {
        if (m == 1u)
            for (; j + 2u <= j1; j += 2u) {
                const uchar *wr = w + (uint64_t)j * row_bytes;
                rlx_q_prefetch_row(wr, row_bytes, ahead);
                rlx_q_prefetch_row(wr + row_bytes, row_bytes, ahead);
                float s[2];
                Dot::run_pair(cache, wr, row_bytes, blocks, s);
                emit(j, s, 1u);
                emit(j + 1u, s + 1, 1u);
            }
    }
    for (; j < j1; ++j) {
        const uchar *wr = w + (uint64_t)j * row_bytes;
        rlx_q_prefetch_row(wr, row_bytes, ahead);
        float s[RLX_QGEMV_MAX_M];
        Dot::run(cache, m, xrow, wr, blocks, s);
        emit(j, s, m);
    }
}

// gemv_<fmt> / gemv1_<fmt> (one computation on the CPU, as in quant.h) as
// the kernel `name`: the integer form `gemv` (a template <Q, T> returning
// false where x needs the f32 form, having written nothing), else
// quant.h's f32 form.
#define RLX_QINT_GEMV_KERNEL(name, gemv)                                                                         \
    template <typename Q, typename T>                                                                            \
    RLX_KERNEL name(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE const uchar *, w, 1),                \
                    RLX_BUF(RLX_DEVICE T *, y, 2), RLX_BUF(RLX_DEVICE const T *, bias, 3),                       \
                    RLX_PARAMS(QuantGemvParams, p, 4) RLX_IDS) {                                                 \
        const uint n = p->n, rpg = p->rows_per_group;                                                            \
        const uint j0 = rlx_group_id.x * rpg;                                                                    \
        if (j0 >= n || p->m == 0u) return;                                                                       \
        const uint j1 = rpg < n - j0 ? j0 + rpg : n;                                                             \
        if (!gemv<Q, T>(x, w, y, bias, p, j0, j1, rlx_ids_arg.dispatch)) rlx_q_gemv_cpu<Q, T>(x, w, y, bias, p, j0, j1); \
    }

#endif
