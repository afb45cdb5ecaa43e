"""Every instruction-set variant of the host kernels this CPU runs passes the
kernel suites: RLX_HOST_ISA forces each level in a child pytest over
tests/ops (the kernels against the reference on odd shapes, f32 and f16).
The build compiles the kernels once per level (csrc/host_kernels_<isa>.cpp)
and the shim takes the best the CPU has (csrc/host_cpu.h); the default run
of the suite covers that best level."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np
import pytest

from rlx.runtime import shim

from . import background_runs

ROOT = Path(__file__).resolve().parents[2]
# The levels of this architecture, lowest first, and how the device names them.
if platform.machine() in ("aarch64", "arm64"):
    LEVEL_NAMES = {"baseline": "[baseline kernels]", "neon": "[NEON kernels]", "neondot": "[NEON + dotprod kernels]"}
    SMALL_M_NAMES = {"neon": "[NEON small-M]", "neondot": "[NEON small-M]"}
else:
    LEVEL_NAMES = {"baseline": "[baseline kernels]", "avx2": "[AVX2 kernels]", "avx2vnni": "[AVX2 + AVX-VNNI kernels]",
                   "avx512": "[AVX-512 kernels]", "avx512vnni": "[AVX-512 VNNI kernels]"}
    SMALL_M_NAMES = {"avx512vnni": "[AVX-512 small-M]", "avx512": "[AVX-512 small-M]", "avx2vnni": "[AVX2 small-M]",
                     "avx2": "[AVX2 small-M]"}
# Levels whose kernels differ from the next level up's only in the quant
# GEMVs (the VNNI levels add those alone, csrc/host_quant_vnni.h; ARM64's
# neondot, csrc/host_quant_arm64.h): forced, only the quant suites need
# another run. Every other level runs tests/ops.
QUANT_SUITES = ["tests/ops/test_quant_kernels.py", "tests/ops/test_quant.py"]
LEVEL_BELOW_SUITES = {"avx512": QUANT_SUITES, "avx2vnni": QUANT_SUITES, "neon": QUANT_SUITES}
# Suites of tests/ops that build their own harness from shaders/ with g++
# (tests/c/*.cpp, no ISA flags) and never open the host device: the level
# changes nothing in them, and they are 75% of tests/ops' time, so a forced
# level leaves them to the default run.
HARNESS_SUITES = ["tests/ops/test_splat_group_threads.py", "tests/ops/test_quant_pieces_host.py",
                  "tests/ops/test_norm_group_threads.py", "tests/ops/test_fft_group_threads.py"]


def test_harness_suites_never_open_the_host_device():
    for suite in HARNESS_SUITES:
        text = (ROOT / suite).read_text()
        assert "tests/c/" in text, suite
        for opens_the_device in ("import rlx\n", "from rlx import", "rlx.compile", "Device(", "open_device"):
            assert opens_the_device not in text, (suite, opens_the_device)


# What each x86-64 level needs of the CPU, as /proc/cpuinfo's flags name it
# (csrc/host_cpu.h asks cpuid for the same). The levels are not nested: AMD
# Zen 4 and Intel Cascade Lake have AVX-512 VNNI but not AVX-VNNI.
LEVEL_FLAGS = {"baseline": set(), "avx2": {"avx2", "fma", "f16c"}, "avx2vnni": {"avx2", "fma", "f16c", "avx_vnni"},
               "avx512": {"avx512f", "avx512dq", "avx512bw", "avx512vl", "f16c"},
               "avx512vnni": {"avx512f", "avx512dq", "avx512bw", "avx512vl", "f16c", "avx512_vnni"}}


def _best_level() -> str:
    name = shim.open_device("host", 0).info.name
    return next((level for level, mark in LEVEL_NAMES.items() if mark in name), "baseline")


def _cpu_runs(level: str) -> bool:
    """Whether this CPU has what `level` needs, from /proc/cpuinfo (ARM64,
    or a system without that file: every level below the device's best)."""
    if level not in LEVEL_FLAGS or not Path("/proc/cpuinfo").exists():
        return True
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return LEVEL_FLAGS[level] <= flags


def _level_taken(cap: str) -> str:
    """The level a cap of `cap` runs: the highest at or below it that this CPU has."""
    order = list(LEVEL_NAMES)
    return next(level for level in reversed(order[: order.index(cap) + 1]) if _cpu_runs(level))


def test_the_device_names_its_level_and_the_env_var_caps_it():
    best = _best_level()
    order = list(LEVEL_NAMES)
    for cap in order[: order.index(best) + 1]:
        dev = shim.Device("host", 0, options_override={"isa": cap})
        level = _level_taken(cap)   # a level the CPU lacks falls to the one below
        assert LEVEL_NAMES[level] in dev.info.name, (cap, dev.info.name)
        small_m = SMALL_M_NAMES.get(level)
        assert (small_m is None and "small-M" not in dev.info.name) or small_m in dev.info.name, dev.info.name
    with pytest.raises(Exception, match="isa"):
        shim.Device("host", 0, options_override={"isa": "sse9"})
    other = "neon" if "avx2" in LEVEL_NAMES else "avx2"   # a level of the other architecture
    with pytest.raises(Exception, match="levels are"):
        shim.Device("host", 0, options_override={"isa": other})


def _forced_level_skip(level: str) -> str | None:
    """Why the forced-level run of `level` does not apply here (None: it does)."""
    if level not in LEVEL_NAMES:
        return f"{level} is not a level of {platform.machine()}"
    order = list(LEVEL_NAMES)
    if order.index(level) >= order.index(_best_level()):
        return f"this CPU's best level is {_best_level()}: the default run covers it"
    if _level_taken(level) != level:
        return f"this CPU lacks {level}: forced, it runs {_level_taken(level)}'s kernels, that case's run"
    return None


def _forced_level_run(level: str):
    """`level` with the mark of its child pytest, run beside the suite
    (tests/runtime/background_runs.py) where it applies."""
    if _forced_level_skip(level) is not None:
        return level
    suites = LEVEL_BELOW_SUITES.get(level, ["tests/ops", *(f"--ignore={suite}" for suite in HARNESS_SUITES)])
    argv = background_runs.child_pytest(*suites)
    env = dict(os.environ, RLX_HOST_ISA=level, RLX_CALIBRATE="0")
    return pytest.param(level, marks=background_runs.declare(f"isa-{level}", argv, cwd=str(ROOT), env=env,
                                                             timeout=900))


@pytest.mark.parametrize("level", [_forced_level_run(level) for level in
                                   ("baseline", "avx2", "avx2vnni", "avx512", "neon")])
def test_kernel_suites_pass_at_a_forced_lower_level(level):
    reason = _forced_level_skip(level)
    if reason is not None:
        pytest.skip(reason)
    ran = background_runs.result(f"isa-{level}")
    assert ran.returncode == 0, ran.output_tail()


@pytest.mark.parametrize("level", ["avx512", "avx2", "neon"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_small_m_kernel_at_each_level_matches_numpy(level, dtype):
    """The small-M gemm (few rows of A against row-major weights, trans_b):
    its AVX-512 and AVX2 forms on odd k (tails of 16 and 8 lanes), m up to 64
    and in 64-row panels up to 128,
    f32 and f16, and f32 A against bf16 weights (widened in registers; bf16=0
    keeps the AVX-512 BF16 kernels out), with beta, against numpy in float64."""
    from rlx.ir.dtype import from_bf16, to_bf16
    from rlx.runtime.shim import DTYPE_BF16, DTYPE_F16, DTYPE_F32, CommandBuffer, Device

    if level not in SMALL_M_NAMES:
        pytest.skip(f"{level} is not a level of {platform.machine()} (ARM64 is checked under qemu)")
    dev = Device("host", 0, options_override={"isa": level, "bf16": "0"})
    mark = SMALL_M_NAMES[level]
    if mark not in dev.info.name:
        dev.close()
        pytest.skip(f"this CPU has no {level} small-M kernel")
    np_dt = np.float16 if dtype == "f16" else np.float32
    rng = np.random.default_rng(3)
    # m up to the kernel's 64 rows (kMaxRows), then 64-row panels up to 128 (a short last panel included),
    # and 129 (the BLAS path) beside them.
    for m, n, k in ((1, 37, 16), (5, 33, 17), (16, 9, 33), (3, 64, 100), (7, 5, 8 * 13 + 5), (17, 19, 40),
                    (33, 70, 29), (64, 21, 50), (65, 18, 37), (100, 131, 40), (128, 70, 33), (129, 18, 37)):
        a = rng.standard_normal((m, k)).astype(np_dt)
        b = rng.standard_normal((n, k)).astype(np_dt)     # weights [N, K]
        if dtype == "bf16":
            b_bits = to_bf16(b)
            b = from_bf16(b_bits)                         # the values the kernel sees
        c0 = rng.standard_normal((m, n)).astype(np_dt)
        bufs = [dev.alloc(x.nbytes) for x in (a, b_bits if dtype == "bf16" else b, c0)]
        for buf, x in zip(bufs, (a, b_bits if dtype == "bf16" else b, c0)):
            buf.write(0, x)
        with CommandBuffer(dev) as cb:
            cb.gemm(*bufs, m, n, k, lda=k, ldb=k, ldc=n, trans_b=True, alpha=0.5, beta=0.25,
                    dtype=DTYPE_F16 if dtype == "f16" else DTYPE_F32,
                    b_dtype={"f32": DTYPE_F32, "f16": DTYPE_F16, "bf16": DTYPE_BF16}[dtype])
            cb.commit()
            cb.wait()
        got = np.frombuffer(bufs[2].read(0, c0.nbytes), np_dt).reshape(m, n).astype(np.float64)
        want = 0.5 * a.astype(np.float64) @ b.astype(np.float64).T + 0.25 * c0.astype(np.float64)
        tol = 2e-2 if dtype == "f16" else 1e-5   # bf16: exact products of the rounded weights, f32 sums
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(k), err_msg=f"{level} {m}x{n}x{k}")
        for buf in bufs:
            buf.free()
    dev.close()


@pytest.mark.parametrize("level", ["avx512", "avx2"])
@pytest.mark.parametrize("beta", [0.0, 0.25])
@pytest.mark.parametrize("threads", ["1", "2", "7"])
def test_packed_small_m_form_matches_numpy(level, beta, threads):
    """The small-M gemm's packed-panel form (f32 on x86-64, 16-256 rows at
    the AVX-512 level and 64-128 at AVX2, in 128-row panels,
    csrc/host_small_m_packed_body.h; the dot form below, the BLAS above):
    whole and partial panels of columns (n not a multiple of 32 or 16), k
    in several 256-value slices with a tail that is not a whole transposed
    block, A with a row stride longer than k, and beta == 0 over a C full
    of NaN (which must never be read); at 1, 2 and 7 workers (many workers
    narrow the column blocks down to one panel's width)."""
    from rlx.runtime.shim import CommandBuffer, Device

    if level not in SMALL_M_NAMES:
        pytest.skip(f"{level} is not a level of {platform.machine()}")
    dev = Device("host", 0, options_override={"isa": level, "threads": threads})
    if SMALL_M_NAMES[level] not in dev.info.name:
        dev.close()
        pytest.skip(f"this CPU has no {level} small-M kernel")
    assert dev.info.compute_units == int(threads)
    rng = np.random.default_rng(11)
    for m, n, k, pad in ((16, 33, 16, 0), (17, 64, 257, 3), (48, 100, 300, 0), (23, 7, 40, 5), (64, 130, 513, 1),
                         (65, 31, 17, 2), (100, 70, 31, 0), (128, 96, 384, 2), (128, 1, 64, 0), (129, 40, 48, 0),
                         (256, 65, 270, 4), (257, 33, 20, 0)):
        lda = k + pad
        a = rng.standard_normal((m, lda)).astype(np.float32)
        b = rng.standard_normal((n, k)).astype(np.float32)     # weights [N, K]
        c0 = np.full((m, n), np.nan, np.float32) if beta == 0 else rng.standard_normal((m, n)).astype(np.float32)
        bufs = [dev.alloc(x.nbytes) for x in (a, b, c0)]
        for buf, x in zip(bufs, (a, b, c0)):
            buf.write(0, x)
        with CommandBuffer(dev) as cb:
            cb.gemm(*bufs, m, n, k, lda=lda, ldb=k, ldc=n, trans_b=True, alpha=0.5, beta=beta)
            cb.commit()
            cb.wait()
        got = np.frombuffer(bufs[2].read(0, c0.nbytes), np.float32).reshape(m, n).astype(np.float64)
        want = 0.5 * a[:, :k].astype(np.float64) @ b.astype(np.float64).T
        if beta:
            want += beta * c0.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(k), err_msg=f"{level} {m}x{n}x{k}")
        for buf in bufs:
            buf.free()
    dev.close()
