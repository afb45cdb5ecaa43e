// A growing heap array for the host kernels' per-thread scratch (the
// integer copies of x of csrc/host_quant_vnni.h and csrc/host_quant_arm64.h).
// Not std::vector: those files are compiled under target pragmas, and
// libstdc++'s always_inline allocator members then fail to inline into the
// pragma's functions (GCC 13: "target specific option mismatch"). Its
// members only call malloc's family: any level's copy of them runs anywhere.
// The array starts on a 64-byte line: the forms read it in 64-byte vectors
// (x's 16-bit and 8-bit pieces), and from malloc's 16-byte alignment three
// loads in four straddled two cache lines (the AVX-512 VNNI q4_k GEMV 12%
// slower a row, by where a thread's buffer happened to land; session 51).
#ifndef RLX_HOST_HEAP_BUFFER_H
#define RLX_HOST_HEAP_BUFFER_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

template <typename T> struct RlxHeapBuffer {
    T *p = nullptr;
    size_t n = 0;
    RlxHeapBuffer() = default;
    RlxHeapBuffer(const RlxHeapBuffer &) = delete;
    RlxHeapBuffer &operator=(const RlxHeapBuffer &) = delete;
    ~RlxHeapBuffer() { free(p); }
    bool reserve(size_t count) {   // false: out of memory (the old contents are kept)
        if (count <= n) return true;
        void *q = nullptr;
        if (posix_memalign(&q, 64, count * sizeof(T)) != 0) return false;
        if (p) memcpy(q, p, n * sizeof(T));
        free(p);
        p = (T *)q, n = count;
        return true;
    }
    T *data() { return p; }
    const T *data() const { return p; }
    T &operator[](size_t i) { return p[i]; }
    const T &operator[](size_t i) const { return p[i]; }
};

#endif
