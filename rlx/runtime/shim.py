"""Loading the device shims (csrc/rlx_shim.h, ABI v2) with ctypes.

Used at compile time only: opening devices, allocating buffers, compiling
libraries and looking up pipelines. The per-run path is the Cython core,
which takes ``Shim.api_address`` and calls the function table directly.
``CommandBuffer`` and ``Icb`` below wrap the encoding calls for the
conformance tests; they are not a run loop.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rlx import env
from rlx.errors import (
    ConfigError,
    DeviceError,
    DeviceUnavailableError,
    KernelCompileError,
    RlxError,
    UnsupportedOpError,
)

ABI_VERSION = 3   # csrc/rlx_shim.h RLX_SHIM_ABI_VERSION
MAX_BINDINGS = 12
PIPELINE_INDIRECT = 1
DTYPE_F32 = 0
DTYPE_F16 = 1
DTYPE_BF16 = 2
GEMM_SCALE_TENSOR, GEMM_SCALE_OUTER = 0, 1   # rlx_gemm_desc.scale_mode (csrc/rlx_shim.h)
DTYPE_F8E4M3 = 3   # FP8 gemm operands, where DeviceInfo.gemm_fp8
DTYPE_F8E5M2 = 4
BACKENDS = ("host", "cuda", "metal")

# rlx_status
OK, ERR_ARG, ERR_OOM, ERR_COMPILE, ERR_NOT_FOUND, ERR_DEVICE, ERR_UNSUPPORTED, ERR_UNAVAILABLE = range(8)
_ERROR_OF = {
    ERR_ARG: RlxError,
    ERR_OOM: DeviceError,
    ERR_COMPILE: KernelCompileError,
    ERR_NOT_FOUND: UnsupportedOpError,
    ERR_DEVICE: DeviceError,
    ERR_UNSUPPORTED: UnsupportedOpError,
    ERR_UNAVAILABLE: DeviceUnavailableError,
}

_ROOT = Path(__file__).resolve().parent.parent  # the rlx package

# ---- ctypes mirror of rlx_shim.h (field order and types exactly as in C) ----------
_p = ctypes.c_void_p
_st = ctypes.c_int  # rlx_status (a C enum: int-sized)
_u32, _u64, _i32, _i64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64
_pp = ctypes.POINTER(ctypes.c_void_p)
_u32x3 = ctypes.POINTER(ctypes.c_uint32)


class DeviceInfoC(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 128),
        ("hardware_id", ctypes.c_char * 128),
        ("max_buffer_length", _u64),
        ("max_threads_per_group", _u32),
        ("simd_width", _u32),
        ("unified_memory", _u32),
        ("supports_f16", _u32),
        ("compute_units", _u32),
        ("gemm_bias", _u32), ("gemm_fp8", _u32), ("gemm_fp8_outer", _u32), ("reserved", _u32 * 4),
    ]


class PipelineInfoC(ctypes.Structure):
    _fields_ = [("max_threads_per_group", _u32), ("execution_width", _u32), ("value_bindings", _u32),
                ("reserved", _u32 * 5)]


class GemmDescC(ctypes.Structure):
    _fields_ = [
        ("a", _p), ("b", _p), ("c", _p),
        ("a_offset", _u64), ("b_offset", _u64), ("c_offset", _u64),
        ("m", _i64), ("n", _i64), ("k", _i64),
        ("lda", _i64), ("ldb", _i64), ("ldc", _i64),
        ("trans_a", _i32), ("trans_b", _i32),
        ("dtype", _i32),
        ("alpha", ctypes.c_float), ("beta", ctypes.c_float),
        ("batch", _i64), ("stride_a", _i64), ("stride_b", _i64), ("stride_c", _i64),
        ("outer", _i64), ("outer_stride_a", _i64), ("outer_stride_b", _i64), ("outer_stride_c", _i64),
        ("b_dtype", _i32), ("c_dtype", _i32),
        ("bias", _p), ("bias_offset", _u64),
        ("a_scale", _p), ("b_scale", _p), ("a_scale_offset", _u64), ("b_scale_offset", _u64),
        ("scale_mode", _i32),
    ]


SCHEDULE_DISPATCH, SCHEDULE_GEMM, SCHEDULE_ICB = 0, 1, 2
SCHEDULE_SERIAL = 1   # rlx_schedule_desc.flags: no launch overlap (csrc/rlx_shim.h)


class ScheduleCmdC(ctypes.Structure):
    _fields_ = [
        ("op", _u32), ("barrier_before", _u32),
        ("pipeline", _p), ("n_bindings", _u32),
        ("groups", _u32 * 3), ("threads", _u32 * 3),
        ("buffers", _p * MAX_BINDINGS), ("offsets", _u64 * MAX_BINDINGS),
        ("gemm", GemmDescC),
        ("icb", _p), ("start", _u32), ("count", _u32),
    ]


class ScheduleDescC(ctypes.Structure):
    _fields_ = [("n_commands", _u32), ("flags", _u32), ("commands", ctypes.POINTER(ScheduleCmdC))]


def _fn(restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)


class ShimApi(ctypes.Structure):
    _fields_ = [
        ("abi_version", _u32),
        ("struct_size", _u32),
        ("backend", ctypes.c_char_p),
        ("last_error", _fn(ctypes.c_char_p)),
        ("unavailable_reason", _fn(ctypes.c_char_p)),
        ("device_count", _fn(ctypes.c_int)),
        ("device_open", _fn(_st, ctypes.c_int, ctypes.c_char_p, _pp)),
        ("device_info", _fn(_st, _p, ctypes.POINTER(DeviceInfoC))),
        ("device_close", _fn(None, _p)),
        ("buffer_alloc", _fn(_st, _p, _u64, _pp)),
        ("buffer_free", _fn(None, _p)),
        ("buffer_host_ptr", _fn(_p, _p)),
        ("buffer_size", _fn(_u64, _p)),
        ("buffer_write", _fn(_st, _p, _u64, _p, _u64)),
        ("buffer_read", _fn(_st, _p, _u64, _p, _u64)),
        ("library_compile", _fn(_st, _p, ctypes.c_char_p, ctypes.c_char_p, _pp)),
        ("library_free", _fn(None, _p)),
        ("pipeline_get", _fn(_st, _p, ctypes.c_char_p, _u32, _pp, ctypes.POINTER(PipelineInfoC))),
        ("pipeline_free", _fn(None, _p)),
        ("cmd_begin", _fn(_st, _p, _pp)),
        ("cmd_set_pipeline", _fn(_st, _p, _p)),
        ("cmd_set_buffer", _fn(_st, _p, _u32, _p, _u64)),
        ("cmd_set_bytes", _fn(_st, _p, _u32, _p, _u32)),
        ("cmd_dispatch", _fn(_st, _p, _u32x3, _u32x3)),
        ("cmd_barrier", _fn(_st, _p)),
        ("cmd_gemm", _fn(_st, _p, ctypes.POINTER(GemmDescC))),
        ("cmd_execute_icb", _fn(_st, _p, _p, _u32, _u32)),
        ("cmd_commit", _fn(_st, _p)),
        ("cmd_wait", _fn(_st, _p, ctypes.POINTER(ctypes.c_double))),
        ("cmd_release", _fn(None, _p)),
        ("icb_create", _fn(_st, _p, _u32, _pp)),
        ("icb_encode_dispatch",
         _fn(_st, _p, _u32, _p, _u32, _pp, ctypes.POINTER(_u64), _u32x3, _u32x3, _u32)),
        ("icb_free", _fn(None, _p)),
        ("cmd_upload", _fn(_st, _p, _p, _u64, _p, _u64)),
        ("cmd_download", _fn(_st, _p, _p, _u64, _p, _u64)),
        ("queue_create", _fn(_st, _p, _pp)),
        ("queue_free", _fn(None, _p)),
        ("cmd_begin_on", _fn(_st, _p, _pp)),
        ("schedule_create", _fn(_st, _p, ctypes.POINTER(ScheduleDescC), _pp)),
        ("cmd_execute_schedule", _fn(_st, _p, _p)),
        ("schedule_free", _fn(None, _p)),
        ("cmd_commit_wait", _fn(_st, _p, ctypes.POINTER(ctypes.c_double))),
        ("buffer_wrap", _fn(_st, _p, _p, _u64, _pp)),
        ("buffer_rebind", _fn(_st, _p, _p)),
    ]


# ---- loading ----------------------------------------------------------------------
def library_path(backend: str) -> Path:
    suffix = ".dylib" if sys.platform == "darwin" else ".so"
    return _ROOT / "lib" / f"librlx_{backend}{suffix}"


class Shim:
    """One loaded shim library and its function table."""

    def __init__(self, backend: str, path: Path, lib: ctypes.CDLL, api_address: int):
        self.backend = backend
        self.path = path
        self.lib = lib  # kept alive: the table points into it
        self.api_address = api_address
        self.api = ctypes.cast(api_address, ctypes.POINTER(ShimApi))

    def last_error(self) -> str:
        msg = self.api.contents.last_error()
        return msg.decode("utf-8", "replace") if msg else ""

    def unavailable_reason(self) -> str | None:
        msg = self.api.contents.unavailable_reason()
        return msg.decode("utf-8", "replace") if msg else None

    def __repr__(self) -> str:
        return f"Shim({self.backend!r}, {str(self.path)!r})"


_shims: dict[str, Shim | DeviceUnavailableError] = {}
_lock = threading.RLock()


def _load(backend: str) -> Shim:
    if backend not in BACKENDS:
        raise DeviceUnavailableError(f"{backend}: unknown backend (known: {', '.join(BACKENDS)})")
    path = library_path(backend)
    if not path.exists():
        raise DeviceUnavailableError(f"{backend}: {path} was not built (on this platform or yet)")
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise DeviceUnavailableError(f"{backend}: cannot load {path}: {exc}") from None
    get_api = lib.rlx_shim_get_api
    get_api.restype = ctypes.c_void_p
    get_api.argtypes = [ctypes.c_uint32]
    address = get_api(ABI_VERSION)
    if not address:
        raise DeviceUnavailableError(f"{backend}: {path} does not implement shim ABI v{ABI_VERSION}")
    api = ctypes.cast(address, ctypes.POINTER(ShimApi)).contents
    if api.abi_version != ABI_VERSION or api.struct_size < ctypes.sizeof(ShimApi):
        raise DeviceUnavailableError(
            f"{backend}: {path} reports ABI v{api.abi_version} with a {api.struct_size}-byte table, "
            f"expected v{ABI_VERSION} with at least {ctypes.sizeof(ShimApi)} bytes")
    return Shim(backend, path, lib, address)


def load_shim(backend: str) -> Shim:
    """The shim of ``backend``, loaded once per process."""
    with _lock:
        if backend not in _shims:
            try:
                _shims[backend] = _load(backend)
            except DeviceUnavailableError as exc:
                _shims[backend] = exc
        result = _shims[backend]
    if isinstance(result, DeviceUnavailableError):
        raise DeviceUnavailableError(str(result))
    return result


def shim_status() -> dict[str, dict]:
    """For every known backend: loaded (the library and ABI are there), path,
    and reason (why it cannot be used here; None when it can). Never raises."""
    out: dict[str, dict] = {}
    for backend in BACKENDS:
        try:
            s = load_shim(backend)
            reason = s.unavailable_reason()
            out[backend] = {"loaded": True, "path": str(s.path),
                            "reason": f"{backend}: {reason}" if reason else None}
        except Exception as exc:  # noqa: BLE001 - status must never raise
            path = library_path(backend) if backend in BACKENDS else None
            out[backend] = {"loaded": False, "path": str(path) if path and path.exists() else None,
                            "reason": str(exc)}
    return out


def check(shim: Shim, status: int, what: str) -> None:
    """Raise the RlxError subclass for a failed rlx_status, with the shim's message."""
    if status == OK:
        return
    cls = _ERROR_OF.get(status, RlxError)
    raise cls(f"{what}: {shim.last_error() or f'status {status}'}")


def shader_dir() -> Path:
    """Kernel sources: the installed copy (rlx/shaders, made by setup.py) or the repo's."""
    installed = _ROOT / "shaders"
    return installed if installed.is_dir() else _ROOT.parent / "shaders"


def _default_blas() -> str | None:
    path = env.blas_library()
    if path:
        return path
    try:
        import scipy_openblas32
    except ImportError:
        return None
    suffix = ".dylib" if sys.platform == "darwin" else ".so"
    candidate = os.path.join(scipy_openblas32.get_lib_dir(), "lib" + scipy_openblas32.get_library() + suffix)
    return candidate if os.path.exists(candidate) else None


def _cuda_options() -> dict[str, str]:
    """Where NVIDIA's pip wheels put NVRTC, cuBLAS and cuda_fp16.h (CUDA 12:
    nvidia/<component>/{lib,include}; CUDA 13: nvidia/cu13/{lib,include}).
    The shim also searches CUDA_HOME, CUDA_PATH and /usr/local/cuda itself."""
    import site

    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    nvidia = [Path(r) / "nvidia" for r in dict.fromkeys(roots) if r and (Path(r) / "nvidia").is_dir()]

    def dirs(*subdirs: str) -> list[str]:
        return [str(n / d) for n in nvidia for d in subdirs if (n / d).is_dir()]

    incs = [d for d in dirs("cu13/include", "cuda_runtime/include") if os.path.exists(os.path.join(d, "cuda_fp16.h"))]
    opts = {"nvrtc": ":".join(dirs("cu13/lib", "cuda_nvrtc/lib")), "cublas": ":".join(dirs("cu13/lib", "cublas/lib")),
            "include_dir": ":".join([str(shader_dir()), *incs[:1]])}
    return {k: v for k, v in opts.items() if v}


def _options(backend: str, override: dict[str, str] | None) -> dict[str, str]:
    """The device_open options from rlx.env. Every shim gets cache_dir and
    include_dir; the host also threads, cxx, blas and bf16; cuda the folders of
    NVRTC, cuBLAS and the CUDA headers from pip wheels (':'-separated)."""
    opts = {"cache_dir": str(env.cache_dir()), "include_dir": str(shader_dir())}
    if backend == "cuda":
        opts.update(_cuda_options())
        opts["pdl"] = "1" if env.cuda_pdl() else "0"
        opts["queues"] = "1" if env.cuda_queues() else "0"
        if env.cuda_staging_max() is not None:
            opts["staging_max"] = str(env.cuda_staging_max())
    if backend == "host":
        opts["threads"] = str(env.num_threads())
        if env.cxx():
            opts["cxx"] = env.cxx()
        blas = _default_blas()
        if blas:
            opts["blas"] = blas
        if not env.host_bf16():
            opts["bf16"] = "0"   # RLX_HOST_BF16=0: bf16 weights widen to f32 for the BLAS
        if not env.host_huge_pages():
            opts["huge_pages"] = "0"   # RLX_HOST_HUGE_PAGES=0: every buffer in 4 KiB pages
        if env.host_isa():
            opts["isa"] = env.host_isa()   # RLX_HOST_ISA: at most this instruction set
    opts.update(override or {})
    for key, value in opts.items():
        if ";" in value or "=" in key:
            raise ConfigError(f"device option {key}={value!r}: keys may not contain '=' nor values ';'")
    return opts


# ---- device objects -----------------------------------------------------------------
@dataclass(frozen=True)
class DeviceInfo:
    name: str
    hardware_id: str
    max_buffer_length: int
    max_threads_per_group: int
    simd_width: int
    unified_memory: bool
    supports_f16: bool
    compute_units: int
    gemm_bias: bool = False   # cmd_gemm adds a bias itself
    gemm_fp8: bool = False    # cmd_gemm takes FP8 A and B (cuda, compute capability >= 8.9)
    # The C dtypes (DTYPE_* bits) cmd_gemm writes from FP8 operands with
    # outer-vector scales (GEMM_SCALE_OUTER): cuda, where cuBLASLt has them.
    gemm_fp8_outer: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


class Device:
    """An open device. ``open_device`` caches one per (backend, index) for the
    process; ``Device.open`` makes a fresh one (tests, other options)."""

    def __init__(self, backend: str, index: int = 0, options_override: dict[str, str] | None = None):
        self.shim = load_shim(backend)
        self.index = index
        self.address = 0
        reason = self.shim.unavailable_reason()
        if reason:
            raise DeviceUnavailableError(f"{backend}: {reason}")
        opts = _options(backend, options_override)
        self.blas: str | None = opts.get("blas") or None
        handle = ctypes.c_void_p()
        status = self.shim.api.contents.device_open(
            index, ";".join(f"{k}={v}" for k, v in opts.items()).encode(), ctypes.byref(handle))
        if status == ERR_NOT_FOUND:
            raise DeviceUnavailableError(f"{backend}: no device {index}: {self.shim.last_error()}")
        check(self.shim, status, f"{backend}: device_open({index})")
        self.address = handle.value
        raw = DeviceInfoC()
        check(self.shim, self.shim.api.contents.device_info(self.address, ctypes.byref(raw)), "device_info")
        self.info = DeviceInfo(
            name=raw.name.decode("utf-8", "replace"), hardware_id=raw.hardware_id.decode("utf-8", "replace"),
            max_buffer_length=raw.max_buffer_length, max_threads_per_group=raw.max_threads_per_group,
            simd_width=raw.simd_width, unified_memory=bool(raw.unified_memory),
            supports_f16=bool(raw.supports_f16), compute_units=raw.compute_units, gemm_bias=bool(raw.gemm_bias),
            gemm_fp8=bool(raw.gemm_fp8), gemm_fp8_outer=int(raw.gemm_fp8_outer))
        self._builtin: Library | None = None
        self._can_wrap: bool | None = None
        # What this device made and may still own, freed by close() first
        # (the ABI's rule: nothing may outlive its device), so an object
        # collected after close() frees nothing twice and touches no freed
        # device (weak: ordinary collection frees them as before).
        self._owned: weakref.WeakSet = weakref.WeakSet()

    def adopt(self, obj):
        """Registers a shim object (buffer, command buffer, ICB, schedule,
        queue) that close() frees before the device goes."""
        if not self.address:
            raise DeviceError(f"{self.shim.backend} device {self.index} is closed")
        self._owned.add(obj)
        return obj

    @classmethod
    def open(cls, backend: str = "host", index: int = 0, options_override: dict[str, str] | None = None
             ) -> Device:
        return cls(backend, index, options_override)

    @property
    def backend(self) -> str:
        return self.shim.backend

    def alloc(self, size: int) -> Buffer:
        if size < 0:
            raise RlxError(f"alloc: size {size} is negative")
        handle = ctypes.c_void_p()
        check(self.shim, self.shim.api.contents.buffer_alloc(self.address, size, ctypes.byref(handle)),
              f"alloc({size})")
        return self.adopt(Buffer(self, handle.value, size))

    @property
    def can_wrap(self) -> bool:
        """Whether the shim makes buffers over the caller's memory
        (buffer_wrap / buffer_rebind: the host shim; the GPU shims answer
        RLX_ERR_UNSUPPORTED), asked once by wrapping nothing."""
        if self._can_wrap is None:
            handle = ctypes.c_void_p()
            status = self.shim.api.contents.buffer_wrap(self.address, None, 0, ctypes.byref(handle))
            self._can_wrap = status == 0
            if status == 0:
                self.shim.api.contents.buffer_free(handle.value)
        return self._can_wrap

    def wrap(self, address: int, size: int) -> Buffer:
        """A buffer over ``size`` bytes at ``address``, memory the caller
        owns and keeps alive (freeing the buffer leaves it alone)."""
        if not self.can_wrap:
            raise DeviceError(f"{self.backend}: the shim cannot wrap the caller's memory")
        handle = ctypes.c_void_p()
        check(self.shim, self.shim.api.contents.buffer_wrap(self.address, address, size, ctypes.byref(handle)),
              f"wrap({size})")
        return self.adopt(Buffer(self, handle.value, size))

    def builtin_library(self) -> Library:
        """The built-in kernels: linked into the host shim; for the GPU shims
        the flattened shaders/ source of the target, compiled (and cached) by it."""
        if self._builtin is None:
            if self.backend == "host":
                self._builtin = self._compile(None, None)
            else:
                from rlx.runtime import shader_source

                self._builtin = self._compile(shader_source.kernel_source(self.backend), None)
        return self._builtin

    def compile_library(self, source: str, options: str | None = None) -> Library:
        """User kernel source (shaders/ style). The host shim puts its prelude
        in front itself; the GPU shims get the text flattened with their
        prelude, since Metal and NVRTC cannot resolve our #includes."""
        if self.backend != "host":
            from rlx.runtime import shader_source

            source = shader_source.kernel_source(self.backend, source)
        return self._compile(source, options)

    def _compile(self, source: str | None, options: str | None) -> Library:
        handle = ctypes.c_void_p()
        what = f"rlx: compiling {self.backend} kernels"
        if self.backend == "cuda":   # NVRTC: minutes on a machine's first use, then its disk cache
            what += " (NVRTC, the first time on this machine; kept in its disk cache)"
        with notice_if_slow(what, SLOW_COMPILE_NOTICE_S):
            status = self.shim.api.contents.library_compile(   # ctypes lets go of the GIL for the call
                self.address, None if source is None else source.encode(),
                None if options is None else options.encode(), ctypes.byref(handle))
        check(self.shim, status, "library_compile" + (" (built-in)" if source is None else ""))
        return Library(self, handle.value)

    def close(self) -> None:
        """Closes a device made by ``Device.open``, first releasing what it
        made that is still alive: command buffers, schedules, ICBs, queues,
        then buffers (the shim ABI's order). Using them afterwards raises."""
        if not self.address:
            return
        rank = {CommandBuffer: 0, Schedule: 1, Icb: 2, Queue: 3, Buffer: 4}
        for obj in sorted(list(self._owned), key=lambda o: rank.get(type(o), 5)):
            obj.release() if isinstance(obj, CommandBuffer) else obj.free()
        self.shim.api.contents.device_close(self.address)
        self.address = 0

    def __repr__(self) -> str:
        return f"Device({self.shim.backend!r}, {self.index}, {self.info.name!r})"


# Seconds a library compile runs before notice_if_slow says so on stderr.
SLOW_COMPILE_NOTICE_S = 3.0


@contextmanager
def notice_if_slow(what: str, after_s: float) -> Iterator[None]:
    """Runs the body; if it takes longer than after_s, prints "<what> ..."
    on stderr then (a compile that would otherwise sit silent for minutes)
    and, when it ends, how long it took."""
    t0 = time.perf_counter()
    said = threading.Event()

    def say() -> None:
        print(f"{what} ...", file=sys.stderr, flush=True)
        said.set()

    timer = threading.Timer(after_s, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said.is_set():
            print(f"{what}: done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


_devices: dict[tuple[str, int], Device] = {}


def open_device(backend: str = "host", index: int = 0) -> Device:
    """The process-wide device of (backend, index), opened on first use."""
    with _lock:
        key = (backend, index)
        if key not in _devices:
            _devices[key] = Device(backend, index)
        return _devices[key]


class Buffer:
    def __init__(self, device: Device, address: int, size: int):
        self.device = device  # keeps the device (and its shim) alive
        self.address = address
        self.size = size
        ptr = device.shim.api.contents.buffer_host_ptr(address)
        self.host_address: int | None = ptr or None

    def _range(self, what: str, offset: int, size: int) -> None:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise RlxError(f"{what}: bytes [{offset}, {offset + size}) outside a {self.size}-byte buffer")

    def write(self, offset: int, data) -> None:
        if isinstance(data, np.ndarray) and data.dtype.name.startswith("float8") and data.flags.c_contiguous:
            data = data.view(np.uint8)   # ml_dtypes' FP8 arrays have no buffer protocol of their own
        view = memoryview(data)
        if not view.c_contiguous:
            raise RlxError("Buffer.write: data must be C-contiguous")
        self._range("Buffer.write", offset, view.nbytes)
        if view.nbytes == 0:
            return
        # The source's own memory, read-only too (a memory-mapped weight):
        # ctypes' from_buffer refuses read-only buffers, and copying them
        # first held a second copy of every weight while a model loaded.
        src = np.frombuffer(view.cast("B"), np.uint8)
        check(self.device.shim, self.device.shim.api.contents.buffer_write(
            self.address, offset, src.ctypes.data, view.nbytes), "Buffer.write")

    def read(self, offset: int, size: int) -> bytes:
        self._range("Buffer.read", offset, size)
        dst = ctypes.create_string_buffer(size)
        check(self.device.shim, self.device.shim.api.contents.buffer_read(
            self.address, offset, ctypes.addressof(dst), size), "Buffer.read")
        return dst.raw

    def numpy_view(self, dtype, offset: int = 0, count: int | None = None):
        """An ndarray aliasing the buffer's memory (host-visible buffers only)."""
        if self.host_address is None:
            raise DeviceError(f"{self.device.shim.backend} buffer is not host-visible")
        dt = np.dtype(dtype)
        if count is None:
            count = (self.size - offset) // dt.itemsize
        self._range("Buffer.numpy_view", offset, count * dt.itemsize)
        raw = (ctypes.c_char * (count * dt.itemsize)).from_address(self.host_address + offset)
        raw._rlx_owner = self  # the array's base keeps the buffer alive
        return np.frombuffer(raw, dtype=dt, count=count)

    def rebind(self, address: int) -> None:
        """Points a wrapped buffer (Device.wrap) at other memory of its size."""
        check(self.device.shim, self.device.shim.api.contents.buffer_rebind(self.address, address), "Buffer.rebind")
        self.host_address = address or None

    def free(self) -> None:
        if self.address:
            address, self.address, self.host_address = self.address, 0, None
            self.device.shim.api.contents.buffer_free(address)

    def __del__(self):
        try:
            self.free()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class Library:
    def __init__(self, device: Device, address: int):
        self.device = device
        self.address = address
        self._pipelines: dict[tuple[str, int], Pipeline] = {}

    def pipeline(self, name: str, flags: int = 0) -> Pipeline:
        key = (name, flags)
        if key not in self._pipelines:
            handle = ctypes.c_void_p()
            info = PipelineInfoC()
            status = self.device.shim.api.contents.pipeline_get(
                self.address, name.encode(), flags, ctypes.byref(handle), ctypes.byref(info))
            check(self.device.shim, status, f"kernel {name!r}")
            self._pipelines[key] = Pipeline(self, handle.value, name, info.max_threads_per_group,
                                            info.execution_width, info.value_bindings)
        return self._pipelines[key]


@dataclass(eq=False)
class Pipeline:
    library: Library
    address: int
    name: str
    max_threads_per_group: int
    execution_width: int
    value_bindings: int = 0   # bit i: binding i taken by value (rlx_pipeline_info.value_bindings)

    def takes_by_value(self, binding: int) -> bool:
        """Whether the kernel takes binding ``binding``'s bytes by value: a
        recorded dispatch then keeps the bytes it was recorded with."""
        return bool(self.value_bindings >> binding & 1)


# ---- encoding helpers for the conformance tests (not the run path) --------------------
def _u32x3(v) -> ctypes.Array | None:
    return None if v is None else (ctypes.c_uint32 * 3)(*v)


def _addr(obj) -> int | None:
    return None if obj is None else obj.address


class CommandBuffer:
    """Thin wrapper over the cmd_* entries: arguments go to the shim unchecked,
    so tests exercise the shim's own validation."""

    def __init__(self, device: Device, queue: Queue | None = None):
        self.device = device
        self._api = device.shim.api.contents
        handle = ctypes.c_void_p()
        if queue is None:
            check(device.shim, self._api.cmd_begin(device.address, ctypes.byref(handle)), "cmd_begin")
        else:
            check(device.shim, self._api.cmd_begin_on(queue.address, ctypes.byref(handle)), "cmd_begin_on")
        self.address = handle.value
        device.adopt(self)
        self._keep: list = []  # buffers and ICBs referenced by recorded commands

    def _check(self, status: int, what: str) -> None:
        check(self.device.shim, status, what)

    def set_pipeline(self, pipeline: Pipeline | None) -> None:
        self._check(self._api.cmd_set_pipeline(self.address, _addr(pipeline)), "cmd_set_pipeline")

    def set_buffer(self, index: int, buffer: Buffer | None, offset: int = 0) -> None:
        self._keep.append(buffer)
        self._check(self._api.cmd_set_buffer(self.address, index, _addr(buffer), offset), "cmd_set_buffer")

    def set_bytes(self, index: int, data: bytes) -> None:
        data = bytes(data)
        self._check(self._api.cmd_set_bytes(self.address, index, data, len(data)), "cmd_set_bytes")

    def dispatch(self, groups, threads=(1, 1, 1)) -> None:
        self._check(self._api.cmd_dispatch(self.address, _u32x3(groups), _u32x3(threads)), "cmd_dispatch")

    def barrier(self) -> None:
        self._check(self._api.cmd_barrier(self.address), "cmd_barrier")

    def gemm(self, a: Buffer, b: Buffer, c: Buffer, m: int, n: int, k: int, *, lda: int, ldb: int, ldc: int,
             trans_a: bool = False, trans_b: bool = False, dtype: int = DTYPE_F32, alpha: float = 1.0,
             beta: float = 0.0, a_offset: int = 0, b_offset: int = 0, c_offset: int = 0, batch: int = 1,
             stride_a: int = 0, stride_b: int = 0, stride_c: int = 0, outer: int = 1,
             outer_strides: tuple[int, int, int] = (0, 0, 0), b_dtype: int | None = None,
             c_dtype: int | None = None, bias: Buffer | None = None, bias_offset: int = 0,
             a_scale: Buffer | None = None, a_scale_offset: int = 0, b_scale: Buffer | None = None,
             b_scale_offset: int = 0, scale_mode: int = 0) -> None:
        self._keep += [a, b, c, bias, a_scale, b_scale]
        desc = GemmDescC(_addr(a), _addr(b), _addr(c), a_offset, b_offset, c_offset, m, n, k, lda, ldb, ldc,
                         int(trans_a), int(trans_b), dtype, alpha, beta, batch, stride_a, stride_b, stride_c,
                         outer, *outer_strides, dtype if b_dtype is None else b_dtype,
                         dtype if c_dtype is None else c_dtype, _addr(bias), bias_offset, _addr(a_scale),
                         _addr(b_scale), a_scale_offset, b_scale_offset, scale_mode)
        self._check(self._api.cmd_gemm(self.address, ctypes.byref(desc)), "cmd_gemm")

    def execute_icb(self, icb: Icb, start: int, count: int) -> None:
        self._keep.append(icb)
        self._check(self._api.cmd_execute_icb(self.address, _addr(icb), start, count), "cmd_execute_icb")

    def execute_schedule(self, schedule: Schedule | None) -> None:
        self._keep.append(schedule)
        self._check(self._api.cmd_execute_schedule(self.address, _addr(schedule)), "cmd_execute_schedule")

    def upload(self, buf: Buffer, offset: int, data) -> None:
        """Copies data (read now) into buf before this command buffer's commands run."""
        view = memoryview(data).cast("B")
        src = (ctypes.c_char * len(view)).from_buffer_copy(view) if len(view) else None
        self._keep.append(buf)
        self._check(self._api.cmd_upload(self.address, _addr(buf), offset, src, len(view)), "cmd_upload")

    def download(self, buf: Buffer, offset: int, out) -> None:
        """Copies buf's bytes into `out` (writable, kept alive here) after the commands ran."""
        view = memoryview(out).cast("B")
        dst = (ctypes.c_char * len(view)).from_buffer(view) if len(view) else None
        self._keep += [buf, out, dst]
        self._check(self._api.cmd_download(self.address, _addr(buf), offset, dst, len(view)), "cmd_download")

    def commit(self) -> None:
        self._check(self._api.cmd_commit(self.address), "cmd_commit")

    def wait(self) -> float:
        """Blocks until done; returns the device seconds (the GIL is released)."""
        seconds = ctypes.c_double()
        self._check(self._api.cmd_wait(self.address, ctypes.byref(seconds)), "cmd_wait")
        return seconds.value

    def commit_wait(self) -> float:
        """Commits and waits in one call (cmd_commit_wait); returns the device
        seconds. The host shim runs the work on this thread."""
        seconds = ctypes.c_double()
        self._check(self._api.cmd_commit_wait(self.address, ctypes.byref(seconds)), "cmd_commit_wait")
        return seconds.value

    def release(self) -> None:
        if self.address:
            address, self.address = self.address, 0
            self._api.cmd_release(address)
            self._keep.clear()

    def __enter__(self) -> CommandBuffer:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _FreedOnce:
    """A shim object released once through its table entry `_free_entry`:
    by free(), or when collected."""
    _free_entry = ""
    address: int | None = None

    def free(self) -> None:
        if self.address:
            address, self.address = self.address, 0
            getattr(self._api, self._free_entry)(address)

    def __del__(self):
        try:
            self.free()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class Queue(_FreedOnce):
    """A queue of the device (rlx_shim.h): its command buffers run in commit
    order, and may overlap those of other queues."""
    _free_entry = "queue_free"

    def __init__(self, device: Device):
        self.device = device
        self._api = device.shim.api.contents
        handle = ctypes.c_void_p()
        check(device.shim, self._api.queue_create(device.address, ctypes.byref(handle)), "queue_create")
        self.address = handle.value
        device.adopt(self)


class Icb(_FreedOnce):
    """Indirect command buffer: dispatches encoded once, replayed by execute_icb."""
    _free_entry = "icb_free"

    def __init__(self, device: Device, capacity: int):
        self.device = device
        self._api = device.shim.api.contents
        handle = ctypes.c_void_p()
        check(device.shim, self._api.icb_create(device.address, capacity, ctypes.byref(handle)), "icb_create")
        self.address = handle.value
        device.adopt(self)
        self.capacity = capacity
        self._keep: dict[int, tuple] = {}

    def encode_dispatch(self, index: int, pipeline: Pipeline | None, bindings, groups, threads=(1, 1, 1),
                        barrier_before: bool = False) -> None:
        """bindings: a list of Buffer or (Buffer, byte offset)."""
        pairs = [b if isinstance(b, tuple) else (b, 0) for b in bindings]
        n = len(pairs)
        bufs = (ctypes.c_void_p * max(n, 1))(*[_addr(b) for b, _ in pairs])
        offs = (ctypes.c_uint64 * max(n, 1))(*[o for _, o in pairs])
        status = self._api.icb_encode_dispatch(self.address, index, _addr(pipeline), n, bufs, offs,
                                               _u32x3(groups), _u32x3(threads), int(barrier_before))
        check(self.device.shim, status, "icb_encode_dispatch")
        self._keep[index] = (pipeline, pairs)


class Schedule(_FreedOnce):
    """A whole command list made once by the shim (rlx_schedule_desc) and
    executed by CommandBuffer.execute_schedule. commands: tuples
    ("dispatch", pipeline, bindings, groups[, threads[, barrier]]) with bindings as
    in Icb.encode_dispatch, ("gemm", GemmDescC[, barrier]) or
    ("icb", Icb, start, count[, barrier]); n_commands overrides the count
    given to the shim (tests of bad descriptors)."""
    _free_entry = "schedule_free"

    def __init__(self, device: Device, commands, *, flags: int = 0, n_commands: int | None = None):
        self.device = device
        self._api = device.shim.api.contents
        self._keep = list(commands)
        cmds = (ScheduleCmdC * max(1, len(commands)))()
        for c, spec in zip(cmds, commands):
            op = spec[0]
            if op == "dispatch":
                pipeline, bindings, groups = spec[1:4]
                threads = spec[4] if len(spec) > 4 else (1, 1, 1)
                c.op, c.barrier_before = SCHEDULE_DISPATCH, int(len(spec) > 5 and spec[5])
                pairs = [b if isinstance(b, tuple) else (b, 0) for b in bindings]
                c.pipeline, c.n_bindings = _addr(pipeline), len(pairs)
                for j, (b, o) in enumerate(pairs[:MAX_BINDINGS]):
                    c.buffers[j], c.offsets[j] = _addr(b), o
                c.groups[:], c.threads[:] = list(groups), list(threads)
            elif op == "gemm":
                c.op, c.gemm, c.barrier_before = SCHEDULE_GEMM, spec[1], int(len(spec) > 2 and spec[2])
            elif op == "icb":
                c.op, c.icb, c.start, c.count = SCHEDULE_ICB, _addr(spec[1]), spec[2], spec[3]
                c.barrier_before = int(len(spec) > 4 and spec[4])
            else:
                c.op = int(op)  # a raw op code (tests of bad descriptors)
        desc = ScheduleDescC(len(commands) if n_commands is None else n_commands, flags,
                             cmds if commands else None)
        handle = ctypes.c_void_p()
        check(device.shim, self._api.schedule_create(device.address, ctypes.byref(desc), ctypes.byref(handle)),
              "schedule_create")
        self.address = handle.value
        device.adopt(self)


def gemm_desc(a: Buffer, b: Buffer, c: Buffer, m: int, n: int, k: int, *, lda: int, ldb: int, ldc: int,
              dtype: int = DTYPE_F32, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
              trans_b: bool = False) -> GemmDescC:
    """A single-product rlx_gemm_desc (the schedule tests)."""
    return GemmDescC(_addr(a), _addr(b), _addr(c), 0, 0, 0, m, n, k, lda, ldb, ldc, int(trans_a), int(trans_b),
                     dtype, alpha, beta, 1, 0, 0, 0, 1, 0, 0, 0, dtype, dtype, None, 0)
