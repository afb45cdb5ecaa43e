"""The host shim on ARM64, checked here without an ARM64 machine: built with a
cross compiler (the flags of setup.py's host shim, no -march: ARM64's NEON is
its baseline) and its built-in kernels run through the shim ABI under
qemu-user by tests/c/host_kernels_check.cpp, which compares them with
double-precision answers (NaN rules, GELU's tail, softmax's masked rows,
layernorm, argmax, the shim's own gemm) and, from a case file written here
(the gguf package is on this side only), every GGUF block format of
shaders/quant.h (dequantize in f32 and f16, gather, gemv). This checks
correctness only: speed on ARM64 cannot be measured under emulation.
scripts/ensure_arm64_tools.sh (run by scripts/test.sh) installs the tools.

Time: the cross-builds dominate. The module's fixture compiles every object
the tests need (the shim and kernels at -O3, the harness, the planted-bug
variants at -O1) once, on all cores at once, and each test links its own
library from them.

The quant case file (_write_quant_cases; host_kernels_check.cpp reads it),
every field little-endian, no padding:
    char magic[8] = "RLXQCAS1"; u32 formats; then per format:
        u32 name_len; char name[name_len]         e.g. "q8_0" (no terminator)
        u32 rows, k, nbytes; u8 blocks[nbytes]    W[rows, k] as GGUF tensor data
        f32 deq[rows * k]                         gguf's dequantized W, row-major
        u32 cases; per case:
            u32 m; f32 x[m * k]                   m rows of x, row-major
            f64 want[m * rows]; f64 mag[m * rows] x @ W^T in float64, sum |x||W|
W has 5 rows (two gemv groups of 4, the second partial) of 3 blocks (2 for
the 256-element K- and IQ-formats; bf16, whose block is one element, takes
k = 101: three 32-element chunks and a tail); x has m = 1 and m = 3 rows,
and for the formats with an integer GEMV (INTEGER_FORMS) the hard x of
_hard_xs too. The harness checks each case with f32 x and, where it fits,
f16 x.

The quant GEMVs run at each ARM64 level (QUANT_LEVELS): neondot (SDOT,
qemu's -cpu max), neon (widening multiplies; -cpu cortex-a57 has no
dotprod, so this is also the run-time detection) and baseline (the f32
form)."""

from __future__ import annotations

import ast
import os
import shutil
import struct
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import in_ci
from ops.quant_helpers import FORMATS, block_size, dequantize_reference, random_blocks

ROOT = Path(__file__).resolve().parents[2]
CXX, QEMU = "aarch64-linux-gnu-g++", "qemu-aarch64"
SYSROOT = Path("/usr/aarch64-linux-gnu")


def _kernel_math_flags() -> list[str]:
    """setup.py's KERNEL_MATH_FLAGS, read from its source (importing it would build)."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "KERNEL_MATH_FLAGS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no KERNEL_MATH_FLAGS")


@pytest.fixture(scope="module")
def tools() -> tuple[str, str]:
    cxx, qemu = shutil.which(CXX), shutil.which(QEMU)
    if not (cxx and qemu):
        msg = (f"{CXX} and {QEMU} are needed (scripts/ensure_arm64_tools.sh installs them with apt-get); "
               "without them the ARM64 host kernels are not checked (CI=true: a failure, not a skip)")
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return cxx, qemu


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


# The formats with an integer GEMV on ARM64 (csrc/host_quant_arm64.h): their
# case lists add _hard_xs.
INTEGER_FORMS = ("q8_0", "q5_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k")


def _hard_xs(k: int, block: int, rng) -> list[np.ndarray]:
    """x that stresses a GEMV which splits x into integers per block, as the
    x86 VNNI tests (tests/ops/test_quant.py) do: magnitudes over 2^-20..2^15
    in one block, a spike per block, an all-zero row, values near the f32
    underflow (inside the integer form's range, with subnormals beside
    them), the same in f16's range (the harness runs f16 x where x and the
    products fit), a block maximum under 1e-30 (the f32 form for the whole
    dispatch), a NaN in one row and an infinity in another (which reach
    only their rows), and the spiky row alone (m = 1: the only m the NEON
    level's integer form takes)."""
    def normal(*shape):
        return rng.standard_normal(shape)

    wide = normal(k) * np.exp2(rng.uniform(-20, 15, k))
    spiky = normal(k) * 1e-3
    spiky[::block] = 3e4
    negative_spikes = normal(k) * 1e-2
    negative_spikes[block // 2::block] = -2e3
    near_underflow = normal(k) * 1e-28
    near_underflow[1::7] = 1e-40   # f32 subnormals
    f32_rows = np.stack([wide, spiky, np.zeros(k), normal(k), near_underflow, negative_spikes, normal(k) * 1e4,
                         normal(k) * np.exp2(rng.uniform(-20, 15, k))])
    f16_wide = normal(k) * np.exp2(rng.uniform(-20, 0, k))
    f16_spiky = normal(k) * 1e-3
    f16_spiky[::block] = 30.0
    f16_rows = np.stack([f16_wide, f16_spiky, np.zeros(k), normal(k) * 1e-7])
    tiny = np.stack([normal(k) * 1e-36, normal(k)])
    special = normal(5, k) * 0.5
    special[1, 5], special[3, k - 2] = np.nan, np.inf
    return [a.astype(np.float32) for a in (f32_rows, f16_rows, tiny, special, spiky[None])]


def _write_quant_cases(path: Path) -> None:
    """The case file of every format (the layout is in the module's docstring)."""
    out = [b"RLXQCAS1", struct.pack("<I", len(FORMATS))]
    rows = 5
    for i, fmt in enumerate(FORMATS):
        rng = np.random.default_rng([i, 2024])
        elems, _ = block_size(fmt)
        k = 101 if elems == 1 else (2 if elems == 256 else 3) * elems
        blocks = random_blocks(fmt, rows, k, rng)
        w = dequantize_reference(fmt, blocks, rows, k)
        xs = [(rng.standard_normal((m, k)) * 0.5).astype(np.float32) for m in (1, 3)]
        if fmt in INTEGER_FORMS:
            xs += _hard_xs(k, elems, rng)
        name = fmt.encode()
        out += [struct.pack("<I", len(name)), name, struct.pack("<III", rows, k, blocks.nbytes), blocks.tobytes(),
                w.astype("<f4").tobytes(), struct.pack("<I", len(xs))]
        for x in xs:
            x64, w64 = x.astype(np.float64), w.astype(np.float64)
            with np.errstate(invalid="ignore"):   # inf * 0: NaN, as the kernels give
                want, mag = x64 @ w64.T, np.abs(x64) @ np.abs(w64).T
            out += [struct.pack("<I", len(x)), x.astype("<f4").tobytes(), want.astype("<f8").tobytes(),
                    mag.astype("<f8").tobytes()]
    path.write_bytes(b"".join(out))


class _Builds:
    """Every object the tests link, compiled at once on all cores; a test
    waits for the ones its library needs."""

    def __init__(self, cxx: str, qemu: str, root: Path):
        self.cxx, self.qemu, self.root = cxx, qemu, root
        self.pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
        self.jobs: dict[str, Future] = {}

    def compile(self, name: str, source: Path, opt: str, includes: list[Path], extra: tuple = ()) -> None:
        obj = self.root / f"{name}.o"
        cmd = [self.cxx, opt, "-std=c++17", *extra, *(f"-I{d}" for d in includes), "-c", str(source), "-o",
               str(obj)]
        self.jobs[name] = self.pool.submit(lambda: (_run(cmd), obj))

    def object(self, name: str) -> Path:
        ran, obj = self.jobs[name].result()
        assert ran.returncode == 0, f"{name}: {ran.stderr[-4000:]}"
        return obj

    def shim(self, name: str, shim_obj: str, kernels_obj: str, levels: tuple[str, str] = ("neon", "neondot")) -> Path:
        """librlx_host.so linked from the objects shim_obj, kernels_obj and
        the ARM64 levels' (setup.py's host_isa_sources)."""
        so = self.root / f"{name}.so"
        objs = [str(self.object(o)) for o in (shim_obj, kernels_obj, *levels)]
        linked = _run([self.cxx, "-shared", *objs, "-o", str(so), "-ldl", "-pthread"])
        assert linked.returncode == 0, linked.stderr[-4000:]
        return so

    def check(self, so: Path, *args: str, cpu: str = "max") -> subprocess.CompletedProcess:
        """host_kernels_check on so under qemu-user, emulating `cpu` (max: every
        extension, dotprod included; cortex-a57: ARMv8.0, no dotprod)."""
        check = self.root / "host_kernels_check"
        if not check.exists():
            linked = _run([self.cxx, str(self.object("check")), "-o", str(check), "-ldl"])
            assert linked.returncode == 0, linked.stderr[-4000:]
        return _run([self.qemu, "-cpu", cpu, "-L", str(SYSROOT), str(check), str(so), *args])


def _planted(tree: Path, root: Path, header: str, old: str, new: str, within: str = "") -> Path:
    """A copy of tree (under root) whose header has old replaced by new, in
    the part from `within` to the next line "};" (the struct's end) when
    within is given."""
    copy = root / tree.name
    shutil.copytree(tree, copy)
    path = copy / header
    text = path.read_text()
    start = text.index(within) if within else 0
    end = text.index("\n};", start) if within else len(text)
    part = text[start:end]
    assert old in part, (header, old)
    path.write_text(text[:start] + part.replace(old, new) + text[end:])
    return copy


# The planted bugs, each caught by its own test below.
_GELU_OLD = "RLX_INLINE float rlx_gelu_erf(float x) {"
_SMALL_M_OLD = "vshll_n_u16(vld1_u16(&p->bits), 16)"
_Q8_0_OLD = "rlx_q_f16(b)"   # within struct QFmtQ8_0: its scale d, every use
_NEON_DOT_OLD = "vmull_high_s8(w, x)"   # the NEON level's products of bytes 8-15 of a piece


@pytest.fixture(scope="module")
def builds(tools, tmp_path_factory):
    cxx, qemu = tools
    root = tmp_path_factory.mktemp("arm64")
    b = _Builds(cxx, qemu, root)
    try:
        yield _start(b)
    finally:
        b.pool.shutdown(wait=True, cancel_futures=True)


def _start(b: _Builds) -> _Builds:
    so_flags = ("-fPIC", "-fvisibility=hidden", "-pthread", *_kernel_math_flags())
    csrc, shaders = ROOT / "csrc", ROOT / "shaders"
    # Longest first: the -O3 kernels take most of the time.
    b.compile("kernels", csrc / "host_kernels.cpp", "-O3", [csrc, shaders], so_flags)
    b.compile("shim", csrc / "host/shim.cpp", "-O3", [csrc, shaders], so_flags)
    for level in ("neon", "neondot"):   # the ARM64 levels' integer quant GEMVs
        b.compile(level, csrc / f"host_kernels_{level}.cpp", "-O3", [csrc, shaders], so_flags)
    b.compile("check", ROOT / "tests/c/host_kernels_check.cpp", "-O1", [csrc])
    # A GELU that returns x; a NEON small-M kernel whose bf16 widening shifts
    # by 15; a q8_0 decoder whose f16 scale has its lowest bit flipped.
    bad = _planted(shaders, b.root / "gelu", "prelude/common.h", _GELU_OLD,
                   _GELU_OLD + "\n    if (x < 100.0f) return x;")
    b.compile("kernels_gelu", csrc / "host_kernels.cpp", "-O1", [csrc, bad], so_flags)
    bad = _planted(shaders, b.root / "q8_0", "quant_formats.h", _Q8_0_OLD, "rlx_half_bits_to_float(rlx_q_u16(b) ^ 1u)",
                   within="struct QFmtQ8_0 {")
    b.compile("kernels_q8_0", csrc / "host_kernels.cpp", "-O1", [csrc, bad], so_flags)
    bad = _planted(csrc, b.root / "small_m", "host_small_m.h", _SMALL_M_OLD, _SMALL_M_OLD.replace("16)", "15)"))
    b.compile("shim_small_m", bad / "host/shim.cpp", "-O1", [bad, shaders], so_flags)
    # A NEON integer GEMV that takes bytes 0-7 of every piece twice.
    bad = _planted(csrc, b.root / "neon_dot", "host_quant_arm64.h", _NEON_DOT_OLD,
                   "vmull_s8(vget_low_s8(w), vget_low_s8(x))")
    b.compile("neon_dot", bad / "host_kernels_neon.cpp", "-O1", [bad, shaders], so_flags)
    _write_quant_cases(b.root / "quant_cases.bin")
    return b


def test_host_kernels_on_arm64_under_qemu(builds):
    shim = builds.shim("librlx_host", "shim", "kernels")
    # The best level under qemu's -cpu max (NEON + dotprod: the hand-written
    # small-M kernel) and the baseline one (isa=baseline: the portable gemm),
    # each with every check; the quant GEMVs' levels are
    # test_quant_kernels_on_arm64_under_qemu's.
    for options, level in (("", "[NEON + dotprod kernels] [NEON small-M]"), ("isa=baseline", "[baseline kernels]")):
        ran = builds.check(shim, options)
        assert ran.returncode == 0 and "0 failure(s)" in ran.stdout, ran.stdout + ran.stderr
        assert level in ran.stdout and "[ARM64:" in ran.stdout, ran.stdout
        assert ran.stdout.count("\nok") >= 10, ran.stdout
    ran = builds.check(shim, "isa=avx2")
    assert ran.returncode != 0 and "levels are baseline, neon, neondot" in ran.stderr, ran.stdout + ran.stderr


def _gemv_lines(stdout: str) -> dict[str, tuple[float, str]]:
    """{"gemv_<fmt>_<dtype> m=<m> case <c>": (worst error in bounds, hash of y)} of a check's ok lines."""
    out = {}
    for line in stdout.splitlines():
        words = line.split()
        if line.startswith("ok   gemv_"):
            out[f"{words[1]} {words[2]} case {words[4].rstrip(',')}"] = (float(words[-3]), words[-1])
    return out


# The quant GEMVs' levels under qemu: the CPU model picks the best one (the
# run-time detection: -cpu max has dotprod, cortex-a57 is ARMv8.0), and
# isa=baseline gives the f32 form.
QUANT_LEVELS = {"neondot": ("max", "", "[NEON + dotprod kernels]"), "neon": ("cortex-a57", "", "[NEON kernels]"),
                "baseline": ("max", "isa=baseline", "[baseline kernels]")}


def test_quant_kernels_on_arm64_under_qemu(builds):
    """Every GGUF block format at each ARM64 level (the integer GEMVs of
    INTEGER_FORMS in SDOT at neondot, in widening multiplies at neon for
    m = 1, the f32 form at baseline and at neon above m = 1): dequantize f32
    and f16 and gather bit for bit against gguf, gemv on f32 and f16 x, m = 1
    and 3 and the hard x of _hard_xs, each case on -x then on x in one
    buffer (a stale converted x fails), within 1.2e-5 sum|x||w| + 1e-6 of
    the float64 product. The integer forms sum exactly, so the two integer
    levels must agree bit for bit at m = 1, and differ from the f32 form:
    both levels ran their own code."""
    shim = builds.shim("librlx_host", "shim", "kernels")
    lines = {}
    for level, (cpu, options, name) in QUANT_LEVELS.items():
        ran = builds.check(shim, options, str(builds.root / "quant_cases.bin"), cpu=cpu)
        assert ran.returncode == 0 and "0 failure(s)" in ran.stdout, ran.stdout + ran.stderr
        assert name in ran.stdout and f"quant: {len(FORMATS)} formats" in ran.stdout, ran.stdout
        for fmt in FORMATS:
            for line in (f"dequantize_{fmt}_f32 ", f"dequantize_{fmt}_f16 ", f"gather_{fmt}_f32 ",
                         f"gemv_{fmt}_f32 m=1 ", f"gemv_{fmt}_f32 m=3 ", f"gemv_{fmt}_f16 m=3 "):
                assert f"\nok   {line}" in ran.stdout, (level, line, ran.stdout)
        lines[level] = _gemv_lines(ran.stdout)
    for fmt in INTEGER_FORMS:
        ours = {key: v for key, v in lines["neondot"].items() if key.startswith(f"gemv_{fmt}_")}
        # Every case in f32 (m = 1, 3, 8, 4, 2, 5, 1); in f16 where x and the products fit.
        assert {key for key in ours if "_f32 " in key} == {
            f"gemv_{fmt}_f32 m={m} case {c}" for c, m in enumerate((1, 3, 8, 4, 2, 5, 1))}, (fmt, sorted(ours))
        assert {f"gemv_{fmt}_f16 m={m} case {c}" for c, m in ((0, 1), (1, 3), (3, 4))} <= set(ours), sorted(ours)
        m1 = [key for key in ours if " m=1 " in key]
        assert {key: ours[key][1] for key in m1} == {key: lines["neon"][key][1] for key in m1}, fmt
        differ = {key for key, v in ours.items() if "_f32 " in key and v[1] != lines["baseline"][key][1]}
        # Every case the integer form takes (not the f32 fall-backs: cases 4 and 5).
        assert {f"gemv_{fmt}_f32 m={m} case {c}" for c, m in ((0, 1), (1, 3), (2, 8), (3, 4), (6, 1))} <= differ, fmt
        worst = max(v[0] for key, v in ours.items() if "_f32 " in key)
        assert worst <= 0.25, (fmt, ours)   # measured: at most 0.06 of the bound (q3_k's spike on a zero weight)


def test_a_wrong_neon_integer_gemv_fails_its_level_only(builds):
    """A NEON-level integer GEMV that drops half of each piece's products
    fails every integer format's gemv (at m = 1, on x it converts), at the
    neon level (cortex-a57) only: the SDOT level (-cpu max) keeps its own
    code."""
    shim = builds.shim("neon_dot", "shim", "kernels", levels=("neon_dot", "neondot"))
    cases = str(builds.root / "quant_cases.bin")
    ran = builds.check(shim, "", cases, cpu="cortex-a57")
    assert ran.returncode == 1 and "[NEON kernels]" in ran.stdout, ran.stdout + ran.stderr
    failed = {line.split()[1] for line in ran.stdout.splitlines() if line.startswith("FAIL")}
    assert failed == {f"gemv_{fmt}_{dtype}" for fmt in INTEGER_FORMS for dtype in ("f32", "f16")}, ran.stdout
    ran = builds.check(shim, "", cases, cpu="max")
    assert ran.returncode == 0 and "0 failure(s)" in ran.stdout, ran.stdout + ran.stderr


def test_a_wrong_quant_decoder_fails_its_format_only(builds):
    """A q8_0 decoder whose f16 scale is one f16 step off fails every q8_0
    kernel and only those: the check runs each format's own code (at
    isa=baseline: the f32 GEMV, which uses the decoder; the integer one has
    its own, checked above)."""
    ran = builds.check(builds.shim("q8_0", "shim", "kernels_q8_0"), "isa=baseline",
                       str(builds.root / "quant_cases.bin"))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    failed = [line for line in ran.stdout.splitlines() if line.startswith("FAIL")]
    assert {line.split()[1] for line in failed} == {"dequantize_q8_0_f32", "dequantize_q8_0_f16", "gather_q8_0_f32",
                                                    "gemv_q8_0_f32", "gemv_q8_0_f16"}, ran.stdout
    assert f"{len(failed)} failure(s)" in ran.stdout, ran.stdout
    assert "\nok   dequantize_q4_0_f32 " in ran.stdout and "\nok   gemv_iq4_nl_f32 m=3 " in ran.stdout, ran.stdout


def test_the_neon_small_m_kernel_fails_when_planted_wrong(builds):
    """A NEON small-M kernel whose bf16 widening is wrong (a shift by 15) is
    caught by the bf16 check, so that check runs the NEON code."""
    ran = builds.check(builds.shim("small_m", "shim_small_m", "kernels"))
    assert ran.returncode != 0 and "FAIL small-M gemm, f32 A against bf16" in ran.stdout, ran.stdout
    assert "ok   small-M gemm, f32\n" in ran.stdout, ran.stdout


def test_the_check_fails_on_a_wrong_kernel(builds):
    """The harness is not a test that cannot fail: a host shim whose GELU is
    planted wrong (gelu returns x) is caught."""
    ran = builds.check(builds.shim("gelu", "shim", "kernels_gelu"))
    assert ran.returncode != 0 and "FAIL unary_f32" in ran.stdout, ran.stdout
