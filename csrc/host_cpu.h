/*
 * What the host CPU can run, asked once at device open: the host shim's
 * hand-written kernels (host_small_m.h, host_bf16.h) carry their own target
 * attributes and are chosen at run time from this, so a portable build
 * (RLX_PORTABLE_BUILD=1, no -march) keeps them where the CPU has them.
 */
#ifndef RLX_HOST_CPU_H
#define RLX_HOST_CPU_H

#if defined(__x86_64__) && \
    ((defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10))
#define RLX_HAVE_X86_TARGETS 1
#include <cpuid.h>

namespace rlx_cpu {

// AVX-512 F, DQ, BW and VL, with the OS saving the AVX-512 state (opmask,
// ZMM registers), and F16C for the f16 conversions beside them.
static inline bool has_avx512() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || !(c & (1u << 29))) return false;  // OSXSAVE, F16C
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6u) != 0xe6u) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);  // F, DQ, BW, VL
    return (b & need) == need;
}

// AVX2, FMA and F16C with the OS saving the YMM state: x86-64-v3's vector part.
static inline bool has_avx2() {
    unsigned a, b, c, d;
    const unsigned need1 = (1u << 12) | (1u << 27) | (1u << 29);   // FMA, OSXSAVE, F16C
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & need1) != need1) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0x6u) != 0x6u) return false;                           // XMM and YMM state
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5));  // AVX2
}

// has_avx2() and AVX-VNNI (the VEX vpdpwssd: csrc/host_quant_vnni.h).
static inline bool has_avx_vnni() {
    unsigned a, b, c, d;
    return has_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}

// has_avx512() and AVX512_VNNI (vpdpwssd: csrc/host_quant_vnni.h).
static inline bool has_avx512_vnni() {
    unsigned a, b, c, d;
    return has_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
}

// has_avx512() and AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16).
static inline bool has_avx512_bf16() {
    unsigned a, b, c, d;
    return has_avx512() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

}  // namespace rlx_cpu
#endif

#if defined(__aarch64__)
#include <string>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#elif defined(__linux__)
#include <sys/auxv.h>
#endif

namespace rlx_cpu {

// FEAT_DotProd (SDOT / UDOT): the neondot level's integer GEMVs
// (csrc/host_kernels_neondot.cpp).
static inline bool has_arm64_dotprod() {
#if defined(__APPLE__)
    int v = 0;
    size_t size = sizeof v;
    return sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &size, nullptr, 0) == 0 && v;
#elif defined(__linux__)
    return (getauxval(AT_HWCAP) & (1ul << 20)) != 0;   // HWCAP_ASIMDDP
#else
    return false;
#endif
}

// The ARM64 extensions beyond NEON that the quantized and bf16 kernels can
// use, as " dotprod bf16 i8mm fp16" (Linux: hwcaps; macOS: sysctl's
// hw.optional.arm.FEAT_*). NEON itself is always there.
static inline std::string arm64_features() {
    std::string out;
#if defined(__APPLE__)
    const char *const names[][2] = {{"hw.optional.arm.FEAT_DotProd", " dotprod"}, {"hw.optional.arm.FEAT_BF16", " bf16"},
                                    {"hw.optional.arm.FEAT_I8MM", " i8mm"}, {"hw.optional.arm.FEAT_FP16", " fp16"}};
    for (const auto &n : names) {
        int v = 0;
        size_t size = sizeof v;
        if (sysctlbyname(n[0], &v, &size, nullptr, 0) == 0 && v) out += n[1];
    }
#elif defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    if (hw & (1ul << 20)) out += " dotprod";   // HWCAP_ASIMDDP
    if (hw2 & (1ul << 14)) out += " bf16";     // HWCAP2_BF16
    if (hw2 & (1ul << 13)) out += " i8mm";     // HWCAP2_I8MM
    if (hw & (1ul << 10)) out += " fp16";      // HWCAP_ASIMDHP
#endif
    return out.empty() ? " neon only" : out;
}

}  // namespace rlx_cpu
#endif
#endif
