// The residual norm chain of a sandwich-norm decoder over one row of n
// elements, written once for the two kernels that form it: rmsnorm_add
// (norm.h), which stores it, and gemv1n (quant_gemv.h), which stages it as
// its GEMV's x. With o the block's output, r the residual stream and w,
// w_next the norm weights (each plus `one` / `next_one`: Gemma's +1):
//
//     s = r + rmsnorm(o, w)             every chain
//     v = rmsnorm(s, w_next)            then_norm only
//
// Every value is rounded to T where the unfused ops store it (the normed o,
// the sum), so a fused f16 chain gives the unfused values. The results go
// to a sink, a struct of the kernel's pointers that three overloads of
// free functions take by value (every target's compiler inlines them; no
// member functions, which CUDA would need qualified):
//
//     rlx_sink_sum(sink, i, s)      store the sum of element i, as T
//     rlx_sink_sum_at(sink, i)      that sum back (the streaming form re-reads it)
//     rlx_sink_out(sink, i, v)      element i of the final value (then_norm only)
//
// Each thread re-reads only the sums it stored itself (the same split of
// the row in every pass), so no barrier is needed between a store and its
// load; the caller's barrier orders the results for other threads. Rows of
// at most CACHE elements a thread are read once, every input together,
// before the first reduction (a decode step's 640 are a few a thread: read
// behind the reductions, o, then r and the weights, then the next weights
// were three memory round trips one after another); longer rows stream.
#ifndef RLX_NORM_CHAIN_H
#define RLX_NORM_CHAIN_H

struct RlxNormChain {
    float eps, next_eps;
    float one, next_one;   // 1 where the weights are stored minus one (Gemma), else 0
    bool then_norm;
};

template <typename T, uint CACHE, typename Sink>
RLX_INLINE void rlx_norm_chain(RLX_DEVICE const T *o, RLX_DEVICE const T *r, RLX_DEVICE const T *w,
                               RLX_DEVICE const T *w_next, uint n, RlxNormChain c, Sink sink,
                               RLX_GROUP_MEM float *scratch, uint tid, uint nt RLX_GROUP_IDS) {
    if (n <= CACHE * nt) {   // uniform over the group
        const uint used = (n + nt - 1u) / nt;
        float ov[CACHE], rv[CACHE], wv[CACHE], nv[CACHE];
        float ss = 0.0f;
        for (uint j = 0; j < CACHE; ++j) {
            if (j >= used) break;
            const uint i = tid + j * nt;
            const bool inside = i < n;
            ov[j] = inside ? rlx_to_float(o[i]) : 0.0f, rv[j] = inside ? rlx_to_float(r[i]) : 0.0f;
            wv[j] = inside ? rlx_to_float(w[i]) : 0.0f, nv[j] = inside && c.then_norm ? rlx_to_float(w_next[i]) : 0.0f;
            ss += ov[j] * ov[j];
        }
        const float inv = rlx_rsqrt(rlx_group_sum(ss, scratch) / (float)n + c.eps);
        float ss_sum = 0.0f;
        for (uint j = 0; j < CACHE; ++j) {
            if (j >= used) break;
            const uint i = tid + j * nt;
            const T s = rlx_from_float<T>(rv[j] + rlx_to_float(rlx_from_float<T>(ov[j] * inv * (c.one + wv[j]))));
            rv[j] = rlx_to_float(s);   // the sum, as stored (0 past the row: every input was)
            if (i < n) rlx_sink_sum(sink, i, s);
            ss_sum += rv[j] * rv[j];
        }
        if (!c.then_norm) return;
        const float next_inv = rlx_rsqrt(rlx_group_sum(ss_sum, scratch) / (float)n + c.next_eps);
        for (uint j = 0; j < CACHE; ++j) {
            if (j >= used) break;
            const uint i = tid + j * nt;
            if (i < n) rlx_sink_out(sink, i, rlx_from_float<T>(rv[j] * next_inv * (c.next_one + nv[j])));
        }
        return;
    }
    float ss = 0.0f;
    for (uint i = tid; i < n; i += nt) {
        const float v = rlx_to_float(o[i]);
        ss += v * v;
    }
    const float inv = rlx_rsqrt(rlx_group_sum(ss, scratch) / (float)n + c.eps);
    float ss_sum = 0.0f;
    for (uint i = tid; i < n; i += nt) {
        const float normed = rlx_to_float(rlx_from_float<T>(rlx_to_float(o[i]) * inv * (c.one + rlx_to_float(w[i]))));
        const T s = rlx_from_float<T>(rlx_to_float(r[i]) + normed);
        rlx_sink_sum(sink, i, s);
        ss_sum += rlx_to_float(s) * rlx_to_float(s);
    }
    if (!c.then_norm) return;   // uniform over the group: no thread skips a reduction another waits in
    const float next_inv = rlx_rsqrt(rlx_group_sum(ss_sum, scratch) / (float)n + c.next_eps);
    for (uint i = tid; i < n; i += nt)
        rlx_sink_out(sink, i, rlx_from_float<T>(rlx_to_float(rlx_sink_sum_at(sink, i)) * next_inv *
                                                (c.next_one + rlx_to_float(w_next[i]))));
}

#endif
