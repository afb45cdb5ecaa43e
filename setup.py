"""Build rlx: the Cython core and the device shims.

The shims are plain shared libraries (no Python C API) placed in rlx/lib/ and
loaded with ctypes at run time:
  - librlx_host.so   always (the CPU device; kernels from shaders/ built in)
  - librlx_cuda.so   on Linux (needs no CUDA toolkit to build: the driver,
                     NVRTC and cuBLAS are dlopened at run time)
  - librlx_metal.dylib on macOS only (Metal + MPS)
The kernel sources and the ABI header are copied into the package so a user
kernel can be compiled at run time against the same prelude.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent.resolve()


def sync_package_data() -> None:
    """Copy shaders/ and the ABI header into rlx/ so wheels carry them."""
    dst = ROOT / "rlx" / "shaders"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(ROOT / "shaders", dst)
    (ROOT / "rlx" / "lib").mkdir(exist_ok=True)  # editable builds copy the shims here
    inc = ROOT / "rlx" / "include"
    inc.mkdir(exist_ok=True)
    for header in ("rlx_shim.h", "rlx_thunk.h"):
        shutil.copy2(ROOT / "csrc" / header, inc / header)


class SharedLibrary(Extension):
    """An Extension built as a plain shared library at rlx/lib/<libname>."""

    def __init__(self, name: str, libname: str, sources: list[str], **kw):
        super().__init__(name, sources, **kw)
        self.libname = libname


class BuildExt(build_ext):
    def get_ext_filename(self, fullname: str) -> str:
        # Called with the full dotted name by setuptools and with the last
        # component by distutils' get_ext_fullpath (which joins the package
        # path itself); answer both with the plain library name.
        for ext in self.extensions:
            if isinstance(ext, SharedLibrary):
                if fullname == ext.name:
                    return os.path.join(*ext.name.split(".")[:-1], ext.libname)
                if fullname == ext.name.rsplit(".", 1)[-1]:
                    return ext.libname
        return super().get_ext_filename(fullname)

    def build_extensions(self) -> None:
        # setuptools compiles an extension's sources one after another; the
        # host library has six large translation units (the shim and the
        # kernels once per instruction set), so compile them side by side.
        # Patched once here, not per extension: `build_ext -j N` builds the
        # extensions on threads that share this compiler. N also caps the
        # workers a source list gets (default: every core).
        serial_compile = self.compiler.compile
        workers = self.parallel if isinstance(self.parallel, int) and self.parallel > 1 else os.cpu_count() or 1

        def compile_sources(sources, *args, **kwargs):
            if workers < 2 or len(sources) < 2:
                return serial_compile(sources, *args, **kwargs)
            with ThreadPoolExecutor(min(workers, len(sources))) as pool:
                per_source = pool.map(lambda source: serial_compile([source], *args, **kwargs), sources)
                return [obj for objects in per_source for obj in objects]

        self.compiler.compile = compile_sources
        super().build_extensions()

    def get_export_symbols(self, ext):
        if isinstance(ext, SharedLibrary):
            return []
        return super().get_export_symbols(ext)


def native_flags() -> list[str]:
    # Portable by default: the host kernels are built once per instruction set
    # and chosen at run time (csrc/host_kernels_<isa>.cpp), and the hand-written
    # AVX-512 kernels carry their own target attributes, so a baseline build is
    # as fast as -march=native on the machines measured
    # (benchmarks/results/cpu-bert-f32-native-vs-portable-2026-12-01.json) and
    # runs on any x86-64. RLX_PORTABLE_BUILD=0 tunes for the building machine.
    if os.environ.get("RLX_PORTABLE_BUILD", "1") != "0" or sys.platform == "darwin":
        return []
    return ["-march=native"]


def targets_arm64() -> bool:
    """Whether the build compiles for ARM64 (the machine, or macOS's ARCHFLAGS)."""
    return platform.machine().lower() in ("aarch64", "arm64") or "arm64" in os.environ.get("ARCHFLAGS", "")


def host_isa_sources() -> list[str]:
    """The host kernels' per-level translation units of the target's
    architecture (each is empty on the other one, so a universal build may
    list both): x86-64 AVX2, AVX-VNNI, AVX-512, AVX-512 VNNI; ARM64 the
    integer quant GEMVs in NEON and in NEON + dotprod."""
    x86 = ["csrc/host_kernels_avx2.cpp", "csrc/host_kernels_avx2vnni.cpp", "csrc/host_kernels_avx512.cpp",
           "csrc/host_kernels_avx512vnni.cpp"]
    arm64 = ["csrc/host_kernels_neon.cpp", "csrc/host_kernels_neondot.cpp"]
    if not targets_arm64():
        return x86
    return arm64 + (x86 if "x86_64" in os.environ.get("ARCHFLAGS", "") else [])


sync_package_data()

# Host kernels: reassociation lets GCC vectorize float reductions (sums in
# softmax and the norms) without -ffast-math's finite-math assumption, which
# would break -inf masks. The host shim compiles user kernels with the same
# KERNEL_MATH_FLAGS (csrc/host/device.inc.cpp).
KERNEL_MATH_FLAGS = ["-fno-math-errno", "-fno-trapping-math", "-fassociative-math", "-fno-signed-zeros",
                     "-fopenmp-simd"]
common_cxx = ["-O3", "-std=c++17", "-fvisibility=hidden", *KERNEL_MATH_FLAGS, *native_flags()]

extensions = cythonize(
    [
        Extension(
            "rlx._core",
            ["rlx/_core.pyx"],
            include_dirs=["csrc"],
            depends=["rlx/_core.pxd", "rlx/_core_tables.pxi", "csrc/rlx_shim.h", "csrc/rlx_thunk.h"],
            extra_compile_args=["-O3", *native_flags()],
        )
    ],
    compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
)

extensions.append(
    SharedLibrary(
        "rlx.lib.librlx_host",
        "librlx_host.so" if sys.platform != "darwin" else "librlx_host.dylib",
        # csrc/host/shim.cpp is the shim's one translation unit: it includes csrc/host/*.inc.cpp.
        # The kernels once per instruction set (csrc/host_kernels_<isa>.cpp), chosen at run time.
        ["csrc/host/shim.cpp", "csrc/host_kernels.cpp", *host_isa_sources()],
        include_dirs=["csrc", "shaders"],
        # The built-in kernels come from shaders/: rebuild when any changes.
        depends=sorted(str(p) for p in Path("shaders").rglob("*.h")) + sorted(str(p) for p in Path("csrc").glob("*.h"))
        + sorted(str(p) for p in Path("csrc/host").glob("*.inc.cpp")),
        extra_compile_args=common_cxx,
        extra_link_args=["-pthread"] + ([] if sys.platform == "darwin" else ["-ldl"]),
        language="c++",
    )
)

if sys.platform.startswith("linux"):
    extensions.append(
        SharedLibrary(
            "rlx.lib.librlx_cuda",
            "librlx_cuda.so",
            # One translation unit that includes csrc/cuda/*.inc.c.
            ["csrc/cuda/shim.c"],
            include_dirs=["csrc"],
            depends=["csrc/rlx_shim.h", "csrc/rlx_gemm_check.h", "csrc/rlx_shim_table.h", "csrc/cuda_launch.h"]
            + sorted(str(p) for p in Path("csrc/cuda").glob("*.inc.c")),
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-fvisibility=hidden"],
            extra_link_args=["-ldl", "-pthread"],
            language="c",
        )
    )

if sys.platform == "darwin":
    extensions.append(
        SharedLibrary(
            "rlx.lib.librlx_metal",
            "librlx_metal.dylib",
            ["csrc/metal_shim.m"],
            include_dirs=["csrc"],
            # One translation unit that includes csrc/metal/*.inc.m.
            depends=["csrc/rlx_shim.h", "csrc/rlx_gemm_check.h", "csrc/rlx_shim_table.h", "csrc/rlx_schedule_plan.h"]
            + sorted(str(p) for p in Path("csrc/metal").glob("*.inc.m")),
            # macOS 11: compute commands in indirect command buffers (see the shim's header).
            # CoreGraphics: Apple documents that a command-line process must link it for
            # MTLCreateSystemDefaultDevice to return a device.
            extra_compile_args=["-O2", "-fobjc-arc", "-mmacosx-version-min=11.0"],
            extra_link_args=["-mmacosx-version-min=11.0", "-framework", "Metal",
                             "-framework", "MetalPerformanceShaders", "-framework", "Foundation",
                             "-framework", "CoreGraphics"],
        )
    )

setup(ext_modules=extensions, cmdclass={"build_ext": BuildExt})
