// Device, buffers, libraries and pipelines.
// A part of the host shim: csrc/host/shim.cpp includes it (one translation unit, every
// function in an anonymous namespace); it is not compiled on its own.

namespace {

// ---- device helpers -------------------------------------------------------------
uint64_t fnv1a(uint64_t h, const std::string &s) {
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;  // separator so ("ab","c") != ("a","bc")
}

std::string hex64(uint64_t v) {
    char b[17];
    snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
    return b;
}

std::string read_file(const std::string &path) {
    std::string out;
    if (FILE *f = fopen(path.c_str(), "rb")) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
        fclose(f);
    }
    return out;
}

std::string cpu_model() {  // "model name" of /proc/cpuinfo (x86 Linux), else "unknown"
    const std::string info = read_file("/proc/cpuinfo");
    size_t at = info.find("model name");
    if (at == std::string::npos || (at = info.find(':', at)) == std::string::npos) return "unknown";
    const size_t begin = info.find_first_not_of(" \t", at + 1), end = info.find('\n', at);
    return begin < end ? info.substr(begin, end - begin) : "unknown";
}

bool make_dirs(const std::string &path) {
    for (size_t i = 1; i <= path.size(); ++i)
        if (i == path.size() || path[i] == '/') {
            const std::string part = path.substr(0, i);
            if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
        }
    return true;
}

std::string shell_quote(const std::string &s) {
    std::string out = "'";
    for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return out + "'";
}

rlx_status load_blas(rlx_device *d) {
    void *h = dlopen(d->blas_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return fail(RLX_ERR_ARG, "blas=%s: %s", d->blas_path.c_str(), dlerror());
    d->sgemm = (sgemm_fn)dlsym(h, "scipy_cblas_sgemm");
    if (!d->sgemm) d->sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    if (!d->sgemm) return fail(RLX_ERR_ARG, "blas=%s: has neither scipy_cblas_sgemm nor cblas_sgemm",
                               d->blas_path.c_str());
    typedef void (*set_threads_fn)(int);
    auto set_threads = (set_threads_fn)dlsym(h, "scipy_openblas_set_num_threads");
    if (!set_threads) set_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
    if (set_threads) set_threads(1);  // the device's pool parallelizes gemms (see sgemm)
    return RLX_OK;  // the handle stays open for the life of the process (BLAS threads)
}

rlx_status parse_options(rlx_device *d, const char *options) {
    std::string opts = options ? options : "";
    for (size_t pos = 0; pos < opts.size();) {
        size_t end = opts.find(';', pos);
        if (end == std::string::npos) end = opts.size();
        const std::string item = opts.substr(pos, end - pos);
        pos = end + 1;
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        ARG_CHECK(eq != std::string::npos, "device_open: option '%s' is not key=value", item.c_str());
        const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "threads") {
            char *e = nullptr;
            const long n = strtol(value.c_str(), &e, 10);
            ARG_CHECK(!value.empty() && *e == 0 && n >= 1 && n <= 1024,
                      "device_open: threads=%s: expected an integer in [1, 1024]", value.c_str());
            d->threads = (int)n;
        } else if (key == "blas") {
            d->blas_path = value;
        } else if (key == "cache_dir") {
            d->cache_dir = value;
        } else if (key == "cxx") {
            ARG_CHECK(!value.empty(), "device_open: cxx= is empty");
            d->cxx = value;
        } else if (key == "include_dir") {
            d->include_dir = value;
        } else if (key == "bf16") {
            ARG_CHECK(value == "0" || value == "1", "device_open: bf16=%s: expected 0 or 1", value.c_str());
            d->bf16_kernels = value == "1";
        } else if (key == "huge_pages") {
            ARG_CHECK(value == "0" || value == "1", "device_open: huge_pages=%s: expected 0 or 1", value.c_str());
            d->huge_pages = value == "1";
        } else if (key == "isa") {
            // The levels of this architecture, lowest first (rlx_device::isa).
#ifdef __aarch64__
            static const char *const levels[] = {"baseline", "neon", "neondot"};
#else
            static const char *const levels[] = {"baseline", "avx2", "avx2vnni", "avx512", "avx512vnni"};
#endif
            const int n = (int)(sizeof levels / sizeof *levels);
            d->isa = -1;
            for (int i = 0; i < n; ++i)
                if (value == levels[i]) d->isa = i;
            ARG_CHECK(d->isa >= 0, "device_open: isa=%s: this CPU architecture's levels are %s", value.c_str(),
                      n == 3 ? "baseline, neon, neondot" : "baseline, avx2, avx2vnni, avx512, avx512vnni");
        } else {
            return fail(RLX_ERR_ARG, "device_open: unknown option '%s' (known: threads, blas, cache_dir, cxx, "
                        "include_dir, bf16, huge_pages, isa)", key.c_str());
        }
    }
    return RLX_OK;
}

// ---- device ---------------------------------------------------------------------------------
const char *last_error() { return t_error.c_str(); }
const char *unavailable_reason() { return nullptr; }
int device_count() { return 1; }

void device_close(rlx_device *d) {
    if (!d) return;
    {
        std::lock_guard<std::mutex> lk(d->q_mu);
        d->stopping = true;
    }
    d->q_cv.notify_all();
    if (d->executor.joinable()) d->executor.join();  // it drains the queue first
    {
        std::lock_guard<std::mutex> lk(d->pool.mu);
        d->pool.stop = true;
    }
    d->pool.cv.notify_all();
    for (auto &w : d->pool.workers) w.join();
    for (rlx_cmdbuf *cb : d->spare) delete cb;
    delete d;
}

rlx_status device_open(int index, const char *options, rlx_device **out) {
    ARG_CHECK(out, "device_open: out is NULL");
    *out = nullptr;
    if (index != 0) return fail(RLX_ERR_NOT_FOUND, "device_open: host has one device (index 0), not %d", index);
    rlx_device *d = nullptr;
    try {
        d = new rlx_device;
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        d->threads = (int)std::max(1L, std::min(cores, 1024L));
        rlx_status s = parse_options(d, options);
        if (s == RLX_OK && !d->blas_path.empty()) s = load_blas(d);
        if (s != RLX_OK) { delete d; return s; }
        if (d->cache_dir.empty()) d->cache_dir = "/tmp/rlx-cache-" + std::to_string(getuid());
        const std::string model = cpu_model();
        rlx_device_info &in = d->info;
#if defined(RLX_HAVE_X86_TARGETS)
        // The highest level at or below the cap that this CPU runs. The
        // levels are not nested: AVX-512 VNNI without AVX-VNNI (AMD Zen 4,
        // Intel Cascade Lake) runs 4 and 3 but not 2, so a cap of avx2vnni
        // there takes avx2's kernels, not VEX VNNI ones it would fault on.
        const bool runs[] = {true, rlx_cpu::has_avx2(), rlx_cpu::has_avx_vnni(), rlx_cpu::has_avx512(),
                             rlx_cpu::has_avx512_vnni()};
        while (d->isa > 0 && !runs[d->isa]) --d->isa;
        static const char *const kIsaName[] = {"baseline", "AVX2", "AVX2 + AVX-VNNI", "AVX-512", "AVX-512 VNNI"};
        static const char *const kSmallMName[] = {"", " [AVX2 small-M]", " [AVX-512 small-M]"};
        const std::string features;
#elif defined(__aarch64__) && defined(RLX_HAVE_SMALL_M)
        // NEON is ARM64's baseline: level 1 adds the hand-written kernels and
        // the integer quant GEMVs (csrc/host_quant_arm64.h), level 2 those
        // GEMVs in SDOT where the CPU has the dot-product extension.
        d->isa = std::min(d->isa, rlx_cpu::has_arm64_dotprod() ? 2 : 1);
        static const char *const kIsaName[] = {"baseline", "NEON", "NEON + dotprod"};
        static const char *const kSmallMName[] = {"", " [NEON small-M]"};
        const std::string features = " [ARM64:" + rlx_cpu::arm64_features() + "]";
#else
        d->isa = 0;
        static const char *const kIsaName[] = {"baseline"};
        static const char *const kSmallMName[] = {""};
        const std::string features;
#endif
        // The hand-written AVX-512 kernels only where the level allows them.
#ifdef RLX_HAVE_BF16_KERNELS
        if (d->bf16_kernels && d->isa >= 3) d->bf16_level = rlx_bf16::cpu_level();   // the AVX-512 levels
#endif
        // The small-M kernel of each level: none at the baseline, AVX2's at
        // the AVX2 levels (ARM64: NEON's at 1 and 2), AVX-512's at the AVX-512 ones.
#if defined(__aarch64__)
        d->small_m = d->isa >= 1 ? 1 : 0;
#else
        d->small_m = d->isa >= 3 ? 2 : d->isa >= 1 ? 1 : 0;
#endif
        // The name says which hand-written kernels run here (rlx info, tests).
        snprintf(in.name, sizeof in.name, "host (CPU: %.80s)%s [%s kernels]%s%s%s", model.c_str(),
                 d->sgemm ? "" : " [no BLAS]", kIsaName[d->isa], kSmallMName[d->small_m],
                 d->bf16_level >= 2 ? " [AVX-512 BF16]" : "", features.c_str());
        snprintf(in.hardware_id, sizeof in.hardware_id, "cpu-%s",
                 hex64(fnv1a(fnv1a(14695981039346656037ull, model), std::to_string(cores))).c_str());
        in.max_buffer_length = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
        in.max_threads_per_group = 1024;
        in.simd_width = 1;
        in.unified_memory = 1;
        in.supports_f16 = 1;
        in.compute_units = (uint32_t)d->threads;
        in.gemm_bias = 1;
        d->spare.reserve(4);
        for (int i = 1; i < d->threads; ++i) d->pool.workers.emplace_back(worker_main, &d->pool);
    } catch (...) {
        if (d) device_close(d);  // joins any workers already started
        return fail(RLX_ERR_OOM, "device_open: out of memory or threads");
    }
    *out = d;
    return RLX_OK;
}

rlx_status device_info(rlx_device *d, rlx_device_info *out) {
    RLX_CHECK_DEVICE_INFO(d, out);
    *out = d->info;
    return RLX_OK;
}

// ---- buffers --------------------------------------------------------------------------------
constexpr uint64_t kMapFrom = 1u << 20;    // buffers from this size up come from mmap
constexpr uint64_t kHugePage = 2u << 20;   // x86-64's and ARM64's (4 KiB granule) transparent huge page

// `bytes` (a multiple of 4 KiB) of zero memory from mmap, or MAP_FAILED.
// With `huge` (the device's huge_pages option), from 2 MiB up the mapping
// starts on a 2 MiB boundary and asks for transparent huge pages: Linux's
// default THP mode ("madvise") gives anonymous memory 4 KiB pages unless
// asked, and a weight streamed once a token (Gemma 3's 178 MB vocabulary
// projection) then pays a page walk every 4 KiB and loses the hardware
// prefetcher at every page's end (a
// 2-thread read of 178 MiB: 26 GB/s on 4 KiB pages, 31-36 on 2 MiB,
// benchmarks/README.md, session 31). The slack around the aligned range is
// unmapped again, so buffer_free's munmap(ptr, mapped) stays exact. The
// price is the first touch: on a VM that hands freed memory back to its
// host, a process's fresh huge pages fault in at ~2 ms a MiB (Gemma 3's
// load 2.0 -> 2.5 s there); RLX_HOST_HUGE_PAGES=0 keeps 4 KiB pages.
static void *map_buffer(uint64_t bytes, bool huge) {
    const int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MADV_HUGEPAGE
    if (huge && bytes >= kHugePage) {
        uint8_t *raw = (uint8_t *)mmap(nullptr, bytes + kHugePage, prot, flags, -1, 0);
        if (raw == (uint8_t *)MAP_FAILED) return mmap(nullptr, bytes, prot, flags, -1, 0);   // no room for the slack
        uint8_t *p = (uint8_t *)(((uintptr_t)raw + kHugePage - 1) & ~(uintptr_t)(kHugePage - 1));
        if (p > raw) munmap(raw, (size_t)(p - raw));
        if (raw + kHugePage > p) munmap(p + bytes, (size_t)(raw + kHugePage - p));
        madvise(p, bytes, MADV_HUGEPAGE);   // advice only: 4 KiB pages where the kernel has no huge ones
        return p;
    }
#endif
    return mmap(nullptr, bytes, prot, flags, -1, 0);
}

rlx_status buffer_alloc(rlx_device *d, uint64_t size, rlx_buffer **out) {
    RLX_CHECK_BUFFER_ALLOC(d, size, out);
    // Large buffers come from mmap: page-aligned and zero without touching
    // every page up front. Small ones from aligned_alloc + memset.
    const uint64_t rounded = std::max<uint64_t>(kAlign, (size + kAlign - 1) / kAlign * kAlign);
    const uint64_t mapped = rounded >= kMapFrom ? (rounded + 4095u) / 4096u * 4096u : 0;
    void *p = mapped ? map_buffer(mapped, d->huge_pages) : aligned_alloc(kAlign, rounded);
    if (p == MAP_FAILED || !p)
        return fail(RLX_ERR_OOM, "buffer_alloc: cannot allocate %llu bytes", (unsigned long long)size);
    if (!mapped) memset(p, 0, rounded);
    *out = new rlx_buffer{d, (uint8_t *)p, size, mapped};  // GUARD: a throw leaks p, nothing worse
    return RLX_OK;
}

void buffer_free(rlx_buffer *b) {
    if (!b) return;
    if (b->wrapped) {}   // the caller's memory
    else if (b->mapped) munmap(b->ptr, b->mapped);
    else free(b->ptr);
    delete b;
}

rlx_status buffer_wrap(rlx_device *d, void *ptr, uint64_t size, rlx_buffer **out) {
    ARG_CHECK(out, "buffer_wrap: out is NULL");
    *out = nullptr;
    ARG_CHECK(d, "buffer_wrap: device is NULL");
    ARG_CHECK(ptr || size == 0, "buffer_wrap: NULL memory for %llu bytes", (unsigned long long)size);
    *out = new rlx_buffer{d, (uint8_t *)ptr, size, 0, true};
    return RLX_OK;
}

rlx_status buffer_rebind(rlx_buffer *b, void *ptr) {
    ARG_CHECK(b, "buffer_rebind: buffer is NULL");
    ARG_CHECK(b->wrapped, "buffer_rebind: the buffer was allocated by the shim, not made by buffer_wrap");
    ARG_CHECK(ptr || b->size == 0, "buffer_rebind: NULL memory for %llu bytes", (unsigned long long)b->size);
    b->ptr = (uint8_t *)ptr;
    return RLX_OK;
}

void *buffer_host_ptr(rlx_buffer *b) { return b ? b->ptr : nullptr; }
uint64_t buffer_size(const rlx_buffer *b) { return b ? b->size : 0; }

RLX_DEFINE_CHECK_COPY()

rlx_status buffer_write(rlx_buffer *b, uint64_t offset, const void *src, uint64_t size) {
    if (rlx_status s = check_copy("buffer_write", b, offset, src, size)) return s;
    if (size) memcpy(b->ptr + offset, src, size);
    return RLX_OK;
}

rlx_status buffer_read(const rlx_buffer *b, uint64_t offset, void *dst, uint64_t size) {
    if (rlx_status s = check_copy("buffer_read", b, offset, dst, size)) return s;
    if (size) memcpy(dst, b->ptr + offset, size);
    return RLX_OK;
}

// ---- libraries and pipelines ----------------------------------------------------------------
// Built-in kernels live in this very library: find our own handle.
void *self_handle() {
    Dl_info info;
    if (!dladdr((void *)&rlx_shim_get_api, &info) || !info.dli_fname) return nullptr;
    void *h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    return h ? h : dlopen(nullptr, RTLD_NOW);  // linked into an executable (test drivers)
}

// Compiles user kernel source into cache_dir/host-kernels/<hash>.so (reused
// when present) and returns the path. Two processes may race: each compiles
// to its own temporary name and rename() publishes atomically.
rlx_status compile_user(rlx_device *d, const char *source, const char *options, std::string *so) {
    const std::string opts = options ? options : "";
    // Same math flags as setup.py's KERNEL_MATH_FLAGS for the built-in kernels.
    const std::string flags = "-O3 -std=c++17 -march=native -fPIC -shared -fno-math-errno -fno-trapping-math "
                              "-fassociative-math -fno-signed-zeros -fopenmp-simd";
    // The cache key covers every prelude header (cpu.h includes its siblings),
    // so editing the prelude invalidates cached kernels.
    std::string prelude;
    std::vector<std::string> names;
    if (DIR *dir = opendir((d->include_dir + "/prelude").c_str())) {
        while (dirent *e = readdir(dir)) names.push_back(e->d_name);
        closedir(dir);
    }
    std::sort(names.begin(), names.end());
    for (const std::string &name : names) prelude += name + "\n" + read_file(d->include_dir + "/prelude/" + name);
    if (read_file(d->include_dir + "/prelude/cpu.h").empty())
        return fail(RLX_ERR_COMPILE, "library_compile: no prelude/cpu.h under include_dir='%s'",
                    d->include_dir.c_str());
    uint64_t h = 14695981039346656037ull;
    for (const std::string &part : {std::string(source), opts, d->cxx, flags, prelude}) h = fnv1a(h, part);
    const std::string dir = d->cache_dir + "/host-kernels";
    *so = dir + "/" + hex64(h) + ".so";
    if (access(so->c_str(), R_OK) == 0) return RLX_OK;
    if (!make_dirs(dir))
        return fail(RLX_ERR_COMPILE, "library_compile: cannot create %s: %s", dir.c_str(), strerror(errno));
    static std::atomic<unsigned> counter{0};
    const std::string tmp = *so + ".tmp" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    const std::string src_path = tmp + ".cpp", lib_path = tmp + ".so";
    if (FILE *f = fopen(src_path.c_str(), "w")) {
        fprintf(f, "#include \"prelude/cpu.h\"\n%s\n", source);
        fclose(f);
    } else {
        return fail(RLX_ERR_COMPILE, "library_compile: cannot write %s: %s", src_path.c_str(), strerror(errno));
    }
    const std::string cmd = d->cxx + " " + flags + " -I" + shell_quote(d->include_dir) + " " + opts + " " +
                            shell_quote(src_path) + " -o " + shell_quote(lib_path) + " 2>&1";
    std::string output;
    int rc = -1;
    if (FILE *p = popen(cmd.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
        const int st = pclose(p);
        rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    unlink(src_path.c_str());
    if (rc != 0) {
        unlink(lib_path.c_str());
        // The shell says 127 when the compiler itself is missing.
        t_error = (rc == 127 ? "no C++ compiler found: cxx=" + d->cxx + ": " : std::string()) + output;
        if (t_error.empty()) t_error = "library_compile: '" + cmd + "' failed";
        return RLX_ERR_COMPILE;
    }
    if (rename(lib_path.c_str(), so->c_str()) != 0) {
        unlink(lib_path.c_str());
        return fail(RLX_ERR_COMPILE, "library_compile: rename to %s: %s", so->c_str(), strerror(errno));
    }
    return RLX_OK;
}

rlx_status library_compile(rlx_device *d, const char *source, const char *options, rlx_library **out) {
    ARG_CHECK(d && out, "library_compile: NULL argument");
    *out = nullptr;
    void *handle = nullptr;
    if (!source) {
        handle = self_handle();
        if (!handle) return fail(RLX_ERR_NOT_FOUND, "library_compile: cannot find the host shim's own handle");
    } else {
        std::string so;
        if (rlx_status s = compile_user(d, source, options, &so)) return s;
        // Library handles are never dlclosed: pipelines and ICB entries hold
        // raw function pointers into them, and they are small.
        handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            const std::string err = dlerror();
            unlink(so.c_str());  // a broken cache entry is rebuilt next time
            return fail(RLX_ERR_COMPILE, "library_compile: dlopen %s: %s", so.c_str(), err.c_str());
        }
    }
    *out = new rlx_library{d, handle, source == nullptr};
    return RLX_OK;
}

void library_free(rlx_library *lib) { delete lib; }

rlx_status pipeline_get(rlx_library *lib, const char *function, uint32_t flags, rlx_pipeline **out,
                        rlx_pipeline_info *info) {
    ARG_CHECK(lib && function && out, "pipeline_get: NULL argument");
    *out = nullptr;
    ARG_CHECK((flags & ~RLX_PIPELINE_INDIRECT) == 0, "pipeline_get: unknown flags 0x%x", flags);
    const std::string sym = std::string("rlx_k_") + function;
    kernel_fn fn = nullptr;
    // A built-in kernel in the best instruction set this device runs (its
    // variants exist on x86-64 and ARM64 builds only; the baseline form always does).
#if defined(RLX_HAVE_X86_TARGETS) || defined(__aarch64__)
#ifdef __aarch64__
    static const char *const kIsaSuffix[] = {"", "__neon", "__neondot"};
#else
    static const char *const kIsaSuffix[] = {"", "__avx2", "__avx2vnni", "__avx512", "__avx512vnni"};
#endif
    for (int isa = lib->builtin ? lib->dev->isa : 0; isa > 0 && !fn; --isa)
        fn = (kernel_fn)dlsym(lib->handle, (sym + kIsaSuffix[isa]).c_str());
#endif
    if (!fn) fn = (kernel_fn)dlsym(lib->handle, sym.c_str());
    if (!fn) return fail(RLX_ERR_NOT_FOUND, "pipeline_get: no kernel '%s' (symbol %s)", function, sym.c_str());
    *out = new rlx_pipeline{lib, fn, flags};
    if (info) {
        *info = rlx_pipeline_info{};
        info->max_threads_per_group = 1024;
        info->execution_width = 1;
    }
    return RLX_OK;
}

void pipeline_free(rlx_pipeline *p) { delete p; }

}  // namespace
