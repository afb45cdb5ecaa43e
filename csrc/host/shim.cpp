// Host (CPU) shim: ABI v1 of csrc/rlx_shim.h implemented on the CPU.
//
// Buffers are aligned host memory. Kernels are shaders/ compiled as C++ through
// shaders/prelude/cpu.h; each exports `rlx_k_<name>(const rlx_cpu_ctx *)` and
// runs one call per threadgroup (group size 1). Built-in kernels are linked
// into this library (csrc/host_kernels.cpp); user kernels are compiled at run
// time with the system C++ compiler and cached on disk. Command buffers are
// recorded, then executed in commit order by one executor thread per device,
// or inline by the thread that waits on them if the executor has not started
// them yet (a one-op run then costs no thread hand-off).
//
// Nothing here aborts: every failure returns a status and sets the calling
// thread's last_error; C++ exceptions (bad_alloc) never cross into C (GUARD).
//
// Layout: this file is the one translation unit; it includes the sections
// from csrc/host/ in the order all three shims keep (csrc/cuda/shim.c,
// csrc/metal_shim.m; tests/test_shim_layout.py checks it):
//   errors, objects, device, buffers, libraries and pipelines, command buffers: recording, gemm,
//   indirect command buffers, execution: commit, wait, release, copies, queues, the ABI table.
// Everything but rlx_shim_get_api is in an anonymous namespace (and the
// library is built with -fvisibility=hidden).
//   pool.inc.cpp      declarations, errors, the thread pool
//   this file         objects (they hold types of the anonymous namespace,
//                     which GCC's -Wsubobject-linkage flags in an included file)
//   device.inc.cpp    device, buffers, libraries and pipelines
//   commands.inc.cpp  command buffers (recording), gemm and the bf16 gemm
//   execute.inc.cpp   ICBs, execution and commit / wait / release, copies, queues
//   this file         the ABI table
#include "rlx_shim.h"
#include "rlx_gemm_check.h"
#include "host_small_m.h"
#include "host_bf16.h"
#include "prelude/cpu.h"  // rlx_cpu_ctx, half

#include <dirent.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

static_assert(RLX_CPU_MAX_BINDINGS == RLX_MAX_BINDINGS, "prelude/cpu.h and rlx_shim.h disagree");

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#include "pool.inc.cpp"

// ---- objects --------------------------------------------------------------------
struct rlx_device {
    int threads = 1;
    std::string blas_path, cache_dir, cxx = "c++", include_dir;
    sgemm_fn sgemm = nullptr;   // NULL: the C++ fallback gemm
    bool bf16_kernels = true;   // option bf16=0 (RLX_HOST_BF16=0): widen bf16 weights, sgemm
    bool huge_pages = true;     // option huge_pages=0 (RLX_HOST_HUGE_PAGES=0): 4 KiB pages for every buffer
    int bf16_level = 0;         // 2: the AVX-512 BF16 kernels of host_bf16.h run here
    int small_m = 0;            // host_small_m.h's kernel here: 2 AVX-512, 1 AVX2 (ARM64: NEON), 0 none
    // The kernels' instruction set (csrc/host_kernels_<isa>.cpp): 0 the
    // build's baseline, 1 the __avx2 variants, 2 __avx2vnni, 3 __avx512,
    // 4 __avx512vnni (the VNNI levels hold only the kernels VNNI speeds up:
    // the rest come from the level below); on ARM64 1 is NEON's hand-written
    // kernels and integer quant GEMVs (the built-in ones are NEON already),
    // 2 those GEMVs in SDOT (__neon, __neondot). The best the CPU has,
    // capped by option isa= (RLX_HOST_ISA).
    int isa = 4;
    rlx_device_info info{};
    Pool pool;
    // One command buffer executes at a time, in commit order (like a Metal
    // command queue or a CUDA stream); whoever executes holds exec_mu.
    std::mutex exec_mu;
    std::mutex q_mu;                    // guards queue, executor, stopping
    std::condition_variable q_cv;
    std::deque<rlx_cmdbuf *> queue;     // committed, not yet executed
    std::thread executor;
    bool stopping = false;
    // Released command buffers kept for reuse: their vectors keep their
    // capacity, so a steady run loop neither mallocs nor page-faults.
    std::mutex spare_mu;
    std::vector<rlx_cmdbuf *> spare;
};

// mapped: mmap length or 0. wrapped: the caller's memory (buffer_wrap), which
// buffer_rebind may move between runs, so recorded entries read ptr when they run.
struct rlx_buffer { rlx_device *dev; uint8_t *ptr; uint64_t size, mapped; bool wrapped = false; };
struct rlx_library { rlx_device *dev; void *handle; bool builtin = false; };
struct rlx_pipeline { rlx_library *lib; kernel_fn fn; uint32_t flags; };

// bufs: resolved addresses. An entry that binds a wrapped buffer also keeps
// those bindings (bit i of `wrapped`: buffer and offset of binding i), resolved
// again when it runs.
struct IcbEntry {
    kernel_fn fn = nullptr;
    void *bufs[RLX_MAX_BINDINGS] = {};
    uint32_t groups[3] = {};
    uint32_t wrapped = 0;
    rlx_buffer *buffers[RLX_MAX_BINDINGS] = {};
    uint64_t offsets[RLX_MAX_BINDINGS] = {};
};
struct rlx_icb { rlx_device *dev; std::vector<IcbEntry> entries; };
// One executor runs every command buffer in commit order, so a queue only
// names its device: ordering within it holds, and queues never overlap.
struct rlx_queue { rlx_device *dev; };

namespace {
enum CmdKind : uint32_t { CMD_DISPATCH, CMD_BARRIER, CMD_GEMM, CMD_ICB };
struct Cmd {
    CmdKind kind;
    uint32_t groups[3];
    kernel_fn fn;
    void *bufs[RLX_MAX_BINDINGS];  // resolved addresses (buffer + offset)
    rlx_icb *icb;
    uint32_t start, count;         // ICB range, or gemm index (start)
};
enum CbState : int { CB_RECORDING, CB_QUEUED, CB_RUNNING, CB_DONE };
}  // namespace

struct rlx_cmdbuf {
    rlx_device *dev;
    std::vector<Cmd> cmds;
    std::vector<rlx_gemm_desc> gemms;
    std::vector<std::unique_ptr<uint8_t[]>> bytes;  // cmd_set_bytes copies (stable addresses)
    rlx_pipeline *pipe = nullptr;                    // encoder state, as on Metal
    void *bind[RLX_MAX_BINDINGS] = {};
    std::atomic<int> state{CB_RECORDING};
    rlx_status status = RLX_OK;                      // written before state = CB_DONE
    std::string error;
    double seconds = 0;
    struct Upload { uint8_t *at; std::vector<uint8_t> bytes; };
    struct Download { const uint8_t *at; void *dst; uint64_t size; };
    std::vector<Upload> uploads;                     // cmd_upload: before the commands run
    std::vector<Download> downloads;                 // cmd_download: after them
};

#include "device.inc.cpp"
#include "commands.inc.cpp"
#include "execute.inc.cpp"

// ---- the ABI table --------------------------------------------------------------------------
namespace {

// Entry points that allocate go through GUARD; the others cannot throw.
const rlx_shim_api kApi = {
    RLX_SHIM_ABI_VERSION, (uint32_t)sizeof(rlx_shim_api), "host",
    last_error, unavailable_reason,
    device_count, device_open, device_info, device_close,
    GUARD(buffer_alloc), buffer_free, buffer_host_ptr, buffer_size, buffer_write, buffer_read,
    GUARD(library_compile), library_free, GUARD(pipeline_get), pipeline_free,
    GUARD(cmd_begin), cmd_set_pipeline, cmd_set_buffer, GUARD(cmd_set_bytes), GUARD(cmd_dispatch),
    GUARD(cmd_barrier), GUARD(cmd_gemm), GUARD(cmd_execute_icb), GUARD(cmd_commit), GUARD(cmd_wait), cmd_release,
    GUARD(icb_create), icb_encode_dispatch, icb_free,
    GUARD(cmd_upload), GUARD(cmd_download),
    GUARD(queue_create), queue_free, GUARD(cmd_begin_on),
    GUARD(schedule_create), GUARD(cmd_execute_schedule), schedule_free,
    GUARD(cmd_commit_wait),
    GUARD(buffer_wrap), buffer_rebind,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const rlx_shim_api *rlx_shim_get_api(uint32_t abi_version) {
    if (abi_version != RLX_SHIM_ABI_VERSION) {
        fail(RLX_ERR_UNSUPPORTED, "rlx_shim_get_api: host shim implements ABI %u, not %u", RLX_SHIM_ABI_VERSION,
             abi_version);
        return nullptr;
    }
    return &kApi;
}
