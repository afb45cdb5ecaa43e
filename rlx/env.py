"""The one place where ``RLX_*`` environment variables are read.

Each variable is declared once in ``VARIABLES`` with its meaning; the README's
table and ``rlx info`` are produced from that list, so they cannot drift.
Values are read when asked for (not at import), so tests can set them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rlx.errors import ConfigError


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: str
    meaning: str


VARIABLES: tuple[EnvVar, ...] = (
    EnvVar("RLX_DEVICE", "cpu", "Default device for `rlx.compile` when none is given (`cpu`, `cuda`, `metal`)."),
    EnvVar("RLX_NUM_THREADS", "number of cores", "Worker threads of the host (CPU) device, its BLAS included."),
    EnvVar("RLX_ARENA_NO_REUSE", "0",
           "`1` gives every value its own arena slot (no reuse by liveness), for bisecting memory bugs."),
    EnvVar("RLX_CACHE_DIR", "$XDG_CACHE_HOME/rlx",
           "Where compiled user kernels, device calibrations and GGUF tokenizers' merge tables are cached."),
    EnvVar("RLX_CALIBRATE", "1", "`0` skips the calibration probes (`rlx calibrate`) and gives the cost model "
           "documented per-backend defaults instead of measured speeds."),
    EnvVar("RLX_CXX", "c++ on PATH", "C++ compiler the host device uses for user kernel source at run time."),
    EnvVar("RLX_BLAS", "scipy-openblas32's library",
           "Path of a CBLAS shared library for the host device's gemm (symbols `cblas_sgemm` or `scipy_cblas_sgemm`)."),
    EnvVar("RLX_HOST_BF16", "1", "`0` turns off the host device's AVX-512 BF16 kernels (used only where the CPU "
           "has them) for gemms with bf16 weights (`precision=\"bf16\"`): those then widen the weights to f32, "
           "in registers in the small-M kernel (up to 16 rows, AVX2 or AVX-512) or in memory before the BLAS "
           "sgemm; read when the device is opened."),
    EnvVar("RLX_HOST_HUGE_PAGES", "1", "`0` keeps the host device's buffers in 4 KiB pages. By default buffers "
           "of 2 MiB and more start on 2 MiB boundaries and ask Linux for transparent huge pages "
           "(`MADV_HUGEPAGE`), which streams large weights faster (the LLM decode step's vocabulary "
           "projection); on a VM that returns freed memory to its host their first touch costs more "
           "(a model load ~0.5 s slower for 250 MB of weights); read when the device is opened."),
    EnvVar("RLX_HOST_ISA", "best the CPU has",
           "The highest instruction set the host device's kernels use: on x86-64 `baseline`, `avx2`, "
           "`avx2vnni`, `avx512` or `avx512vnni` (the VNNI levels: the K-quant decode GEMVs in 16-bit integer "
           "dot products), on ARM64 `baseline`, `neon` or `neondot` (the decode GEMVs of q8_0, q5_0 and the "
           "K-quants in 8-bit integer dot products: SDOT at `neondot`, where the CPU has the dot-product "
           "extension; widening multiplies at `neon`, for one row of x; unset: the best the CPU has; a level "
           "the CPU lacks takes the highest one below it that it has, e.g. `avx2` for `avx2vnni` on an AVX-512 "
           "CPU without AVX-VNNI). A lower "
           "level also turns off "
           "the hand-written kernels above it (small-M gemm, AVX-512 BF16); for tests and bug reports; read when "
           "the device is opened. The BLAS picks its own kernels (OpenBLAS: `OPENBLAS_CORETYPE`)."),
    EnvVar("RLX_QUANT_NO_GEMV", "",
           "Comma-separated GGUF formats (`q4_k,q8_0`, any case; `all` for every one) whose fused decode GEMV "
           "is off: linear/matmul with such weights then dequantize them (a tile of rows at a time) and take "
           "the gemm at every batch size; read at compile time."),
    EnvVar("RLX_REPLAY", "1", "`0` re-encodes every thunk on every run instead of replaying the recorded schedule."),
    EnvVar("RLX_BIND_IO", "1", "`0` copies every input and output of a CPU run through the arena instead of "
           "reading the caller's arrays and writing the result arrays in place (inputs and outputs of 4 KiB "
           "or more, 16-byte aligned, that no kernel writes / that are whole dense values); read at compile "
           "time."),
    EnvVar("RLX_VERBOSE", "0", "`1` prints what compile did (thunks, barriers, segments, arena bytes)."),
    EnvVar("RLX_CUDA_PDL", "auto", "`auto` times each executable's first runs both with programmatic "
           "dependent launch (sm_90+: a kernel starts while its predecessor finishes) and without, and keeps "
           "the faster (`Program.launch_mode`); `1` always launches with it, `0` strictly one kernel after "
           "another."),
    EnvVar("RLX_CUDA_QUEUES", "1", "`1` gives every CUDA executable a stream of its own (executables run from "
           "several threads overlap on the GPU); `0` runs them all on the device's one stream."),
    EnvVar("RLX_FFT_GPU_FOUR_STEP", "1", "GPUs run complex transforms of powers of two from 8192 to 2^24 points "
           "as two `fft_shared` dispatches (the four-step the CPU runs: columns, a twiddle, rows), and so "
           "Bluestein's longer inner transforms (but of framed or padded rows); measured faster than the "
           "Stockham passes on an H100 (benchmarks/README.md, \"H100, session 35\"); `0` takes one Stockham "
           "pass per radix; read at compile time."),
    EnvVar("RLX_CUDA_FP8_GEMM", "1", "`0` keeps FP8 x FP8 `scaled_linear` off cuBLASLt's FP8 gemm on CUDA "
           "(the kernel path: dequantize, gemm, epilogue), as on devices without FP8 tensor cores."),
    EnvVar("RLX_CUDA_STAGING_MAX", "268435456", "Largest input or output (bytes) a CUDA run copies through "
           "pinned staging inside its command buffer (from 1 MiB with several host threads); larger ones are "
           "copied by the driver straight from and to the NumPy array, so pinned memory stays bounded."),
    EnvVar("RLX_PORTABLE_BUILD", "1", "Build time only (read by setup.py): `0` compiles the host shim with "
           "`-march=native` for the building machine; by default it is built for the baseline ISA, with the "
           "kernels in every instruction set chosen at run time (RLX_HOST_ISA), so wheels run everywhere."),
)

_BY_NAME = {v.name: v for v in VARIABLES}


def _raw(name: str) -> str | None:
    if name not in _BY_NAME:
        raise KeyError(f"{name} is not a declared RLX_* variable")
    value = os.environ.get(name)
    return value if value not in (None, "") else None


def _flag(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={value!r}: expected 0 or 1")


def default_device() -> str:
    return _raw("RLX_DEVICE") or "cpu"


def num_threads() -> int:
    value = _raw("RLX_NUM_THREADS")
    if value is None:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"RLX_NUM_THREADS={value!r}: expected a positive integer") from None
    if n < 1:
        raise ConfigError(f"RLX_NUM_THREADS={value!r}: expected a positive integer")
    return n


def num_threads_given() -> bool:
    """Whether RLX_NUM_THREADS is set in this process's environment."""
    return _raw("RLX_NUM_THREADS") is not None


def set_num_threads(threads: int) -> None:
    """RLX_NUM_THREADS for this process (read when its host device opens):
    a Ray actor sized to the CPUs Ray gave it."""
    os.environ["RLX_NUM_THREADS"] = str(int(threads))


def with_num_threads(environ: dict[str, str], threads: int) -> dict[str, str]:
    """A copy of ``environ`` for a child process whose host device uses
    ``threads`` workers (benchmarks that run engines in processes of their own)."""
    return dict(environ, RLX_NUM_THREADS=str(int(threads)))


def host_bf16() -> bool:
    return _flag("RLX_HOST_BF16", True)


def host_huge_pages() -> bool:
    """RLX_HOST_HUGE_PAGES: large host buffers in transparent huge pages."""
    return _flag("RLX_HOST_HUGE_PAGES", True)


# x86-64: the first five; ARM64: baseline, neon, neondot.
HOST_ISAS = ("baseline", "avx2", "avx2vnni", "avx512", "avx512vnni", "neon", "neondot")


def host_isa() -> str | None:
    """RLX_HOST_ISA: the highest instruction set of the host kernels, or None (the best the CPU has)."""
    value = _raw("RLX_HOST_ISA")
    if value is None or value == "":
        return None
    if value not in HOST_ISAS:
        raise ConfigError(f"RLX_HOST_ISA={value!r}: expected one of {', '.join(HOST_ISAS)}")
    return value


def quant_no_gemv() -> frozenset[str]:
    """RLX_QUANT_NO_GEMV: the block formats whose fused GEMV is off."""
    from rlx.ir.dtype import QUANTIZED

    value = (_raw("RLX_QUANT_NO_GEMV") or "").strip()
    if not value:
        return frozenset()
    names = {part.strip().lower() for part in value.split(",") if part.strip()}
    known = set(QUANTIZED) | {"bf16"}
    if "all" in names:
        return frozenset(known)
    unknown = sorted(names - known)
    if unknown:
        raise ConfigError(f"RLX_QUANT_NO_GEMV={value!r}: unknown format(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(known))}, all")
    return frozenset(names)


def arena_no_reuse() -> bool:
    return _flag("RLX_ARENA_NO_REUSE", False)


def replay() -> bool:
    return _flag("RLX_REPLAY", True)


def bind_io() -> bool:
    return _flag("RLX_BIND_IO", True)


def cuda_pdl() -> bool:
    """Whether CUDA kernels may launch with PDL at all (1 or auto)."""
    return cuda_pdl_auto() or _flag("RLX_CUDA_PDL", True)


def cuda_pdl_auto() -> bool:
    """RLX_CUDA_PDL=auto (the default): each executable times its schedules
    with PDL and without over its first runs and keeps the faster."""
    return (_raw("RLX_CUDA_PDL") or "auto").lower() == "auto"


def cuda_queues() -> bool:
    return _flag("RLX_CUDA_QUEUES", True)


def fft_gpu_four_step() -> bool:
    return _flag("RLX_FFT_GPU_FOUR_STEP", True)


def cuda_fp8_gemm() -> bool:
    return _flag("RLX_CUDA_FP8_GEMM", True)


def cuda_staging_max() -> int | None:
    value = _raw("RLX_CUDA_STAGING_MAX")
    if value is None:
        return None
    if not value.isdigit():
        raise ConfigError(f"RLX_CUDA_STAGING_MAX={value!r}: expected a byte count (a non-negative integer)")
    return int(value)


def verbose() -> bool:
    return _flag("RLX_VERBOSE", False)


def calibrate_enabled() -> bool:
    return _flag("RLX_CALIBRATE", True)


def cache_dir() -> Path:
    value = _raw("RLX_CACHE_DIR")
    if value is not None:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rlx"


def cxx() -> str | None:
    return _raw("RLX_CXX")


def blas_library() -> str | None:
    return _raw("RLX_BLAS")


def in_effect() -> dict[str, str]:
    """The RLX_* variables set in this process (for `rlx info`)."""
    return {v.name: os.environ[v.name] for v in VARIABLES if os.environ.get(v.name)}
