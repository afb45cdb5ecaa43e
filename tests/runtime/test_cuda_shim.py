"""The CUDA shim (csrc/cuda/): it builds and loads on every Linux
machine and says clearly why it cannot run; on a machine with an NVIDIA GPU
it compiles the built-in kernels with NVRTC, caches them on disk, replays
schedules as CUDA graphs and maps device errors. The ABI behaviour itself is
the conformance suite tests/cts/, which covers cuda wherever it is usable."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import rlx
from rlx import cli
from rlx.errors import ConfigError, DeviceUnavailableError, KernelCompileError
from rlx.runtime import shader_source, shim
from rlx.runtime.shim import PIPELINE_INDIRECT, CommandBuffer, Device

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CUDA shim is built on Linux only")


def _status() -> dict:
    return shim.shim_status()["cuda"]


def _reason() -> str | None:
    st = _status()
    return st["reason"] if st["loaded"] else f"not loaded: {st['reason']}"


needs_gpu = pytest.mark.skipif(_reason() is not None, reason=f"no usable CUDA GPU here: {_reason()}")


# ---- without a GPU -----------------------------------------------------------------
def test_library_builds_and_loads():
    path = shim.library_path("cuda")
    assert path.exists(), "setup.py builds rlx/lib/librlx_cuda.so on Linux"
    lib = ctypes.CDLL(str(path))
    lib.rlx_shim_get_api.restype = ctypes.c_void_p
    lib.rlx_shim_get_api.argtypes = [ctypes.c_uint32]
    assert lib.rlx_shim_get_api(shim.ABI_VERSION)
    assert lib.rlx_shim_get_api(shim.ABI_VERSION + 1) is None
    s = shim.load_shim("cuda")
    api = s.api.contents
    assert api.backend == b"cuda" and api.abi_version == shim.ABI_VERSION
    assert api.struct_size == ctypes.sizeof(shim.ShimApi)


def test_unavailable_reason_is_clear_and_consistent():
    s = shim.load_shim("cuda")
    reason = s.unavailable_reason()
    api = s.api.contents
    if reason is None:
        assert api.device_count() >= 1
        return
    assert any(word in reason for word in ("libcuda.so.1", "driver", "device")), reason
    assert api.device_count() == 0
    out = ctypes.c_void_p()
    assert api.device_open(0, None, ctypes.byref(out)) == shim.ERR_UNAVAILABLE
    assert not out.value and reason in s.last_error()
    with pytest.raises(DeviceUnavailableError, match="cuda"):
        Device.open("cuda")


def test_null_arguments_without_a_device():
    s = shim.load_shim("cuda")
    api = s.api.contents
    out = ctypes.c_void_p()
    assert api.device_open(0, None, None) == shim.ERR_ARG
    assert api.library_compile(None, b"x", None, ctypes.byref(out)) == shim.ERR_ARG
    assert api.cmd_begin(None, ctypes.byref(out)) == shim.ERR_ARG
    assert api.cmd_commit(None) == shim.ERR_ARG and api.cmd_wait(None, None) == shim.ERR_ARG
    assert api.icb_create(None, 1, ctypes.byref(out)) == shim.ERR_ARG
    assert api.buffer_write(None, 0, None, 0) == shim.ERR_ARG
    assert "NULL" in s.last_error()
    for free in (api.buffer_free, api.library_free, api.pipeline_free, api.cmd_release, api.icb_free,
                 api.device_close):
        free(None)


def test_info_json_states_the_cuda_reason(capsys):
    assert cli.main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    entry = data["shims"]["cuda"]
    assert entry["loaded"], entry
    cuda = next(d for d in data["devices"] if d["name"] == "cuda")
    if _reason() is None:
        assert cuda["available"] and cuda["info"]["hardware_id"].startswith("cuda-")
    else:
        assert entry["reason"] and entry["reason"].startswith("cuda: ")
        assert not cuda["available"] and cuda["reason"]


def test_cuda_options_name_folders_only():
    opts = shim._options("cuda", None)
    assert opts["include_dir"].split(":")[0] == str(shim.shader_dir())
    assert "threads" not in opts
    for key in ("nvrtc", "cublas"):
        for folder in filter(None, opts.get(key, "").split(":")):
            assert os.path.isdir(folder), (key, folder)


def test_staging_max_reaches_the_device_options(monkeypatch):
    monkeypatch.delenv("RLX_CUDA_STAGING_MAX", raising=False)
    assert "staging_max" not in shim._options("cuda", None)   # the shim's default applies
    monkeypatch.setenv("RLX_CUDA_STAGING_MAX", "65536")
    assert shim._options("cuda", None)["staging_max"] == "65536"
    monkeypatch.setenv("RLX_CUDA_STAGING_MAX", "64k")
    with pytest.raises(ConfigError, match="RLX_CUDA_STAGING_MAX"):
        shim._options("cuda", None)


# ---- on an NVIDIA GPU --------------------------------------------------------------
def _run_py(code: str, cache: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, RLX_CACHE_DIR=cache)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One kernel cache for the module's tests: the built-in library takes
    NVRTC a minute or more to compile, once, not once a test. Tests of the
    cache itself use a fresh directory (fresh_gpu, or their own)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def gpu(shared_cache, monkeypatch):
    monkeypatch.setenv("RLX_CACHE_DIR", str(shared_cache))
    dev = Device.open("cuda")
    yield dev
    dev.close()


@pytest.fixture
def fresh_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    dev = Device.open("cuda")
    yield dev
    dev.close()


@needs_gpu
def test_device_info(gpu):
    info = gpu.info
    assert info.hardware_id.startswith("cuda-") and info.simd_width == 32 and not info.unified_memory
    assert info.compute_units >= 1 and info.max_threads_per_group == 1024 and info.supports_f16


@needs_gpu
def test_builtin_kernels_compile_with_nvrtc(fresh_gpu, tmp_path):
    t0 = time.perf_counter()
    lib = fresh_gpu.builtin_library()
    elapsed = time.perf_counter() - t0
    names = [host for host, _ in shader_source.instantiations(shader_source.kernel_source("cuda"))]
    assert names
    for name in names:
        p = lib.pipeline(name, PIPELINE_INDIRECT)
        assert p.execution_width == 32 and 32 <= p.max_threads_per_group <= 1024, name
    cached = list((tmp_path / "cache" / "cuda-kernels").glob("*.bin"))
    assert len(cached) == 1 and cached[0].read_bytes().startswith(b"RLXCUDA1 ")
    print(f"NVRTC compile of {len(names)} kernels: {elapsed:.2f}s")


@needs_gpu
def test_disk_cache_hit_in_a_new_process(tmp_path):
    cache = str(tmp_path / "cache")
    code = """
        import time
        from rlx.runtime.shim import Device
        dev = Device.open("cuda")
        t0 = time.perf_counter()
        lib = dev.builtin_library()
        lib.pipeline("softmax_f16")
        print("SECONDS", time.perf_counter() - t0)
    """
    first = _run_py(code, cache)
    assert first.returncode == 0, first.stderr
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache" / "cuda-kernels").iterdir()}
    assert len(files) == 1
    second = _run_py(code, cache)
    assert second.returncode == 0, second.stderr
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "cache" / "cuda-kernels").iterdir()} == files
    t_first = float(first.stdout.split("SECONDS")[1])
    t_second = float(second.stdout.split("SECONDS")[1])
    assert t_second < 0.5, f"cache hit took {t_second:.3f}s (compile {t_first:.3f}s)"


@needs_gpu
def test_compiled_graph_runs_replayed_and_direct(monkeypatch):
    g, params, inputs = cli._selftest_graph()
    ref = rlx.run_reference(g, inputs, params)
    for replay in (True, False):
        exe = rlx.compile(g, device="cuda", params=params, replay=replay)
        for scale in (1.0, 0.5, 2.0):  # replays of one recorded schedule with new inputs
            scaled = {k: v * scale for k, v in inputs.items()}
            want = ref if scale == 1.0 else rlx.run_reference(g, scaled, params)
            got = exe.run(scaled)
            for name in want:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-3, atol=1e-3, err_msg=f"{name} {replay}")


@needs_gpu
@pytest.mark.parametrize("pdl", ["1", "0", "auto"])
def test_dependent_chain_is_exact_on_every_replay(monkeypatch, pdl):
    """Programmatic dependent launch lets each kernel start while its
    predecessor finishes; every kernel must still see all of its
    predecessor's writes. A chain of 60 dependent kernels over 17 groups
    each, every one reading what the previous wrote, replayed 40 times with
    new inputs, must be exact with and without it."""
    monkeypatch.setenv("RLX_CUDA_PDL", pdl)
    monkeypatch.setattr(shim, "_devices", {})   # a device opened with this setting
    n = 4099
    g = rlx.Graph()
    x = g.input("x", (n,))
    one = g.param("one", (n,))
    y = x
    for i in range(60):
        y = g.add(y, one) if i % 2 == 0 else g.mul(y, g.param(f"s{i}", (1,)))
    g.set_outputs(y=y)
    params = {"one": np.ones(n, np.float32), **{f"s{i}": np.array([1.0], np.float32) for i in range(1, 60, 2)}}
    exe = rlx.compile(g, device="cuda", params=params, passes={"fusion": False})
    for run in range(40):
        xin = np.full(n, float(run), np.float32)
        np.testing.assert_array_equal(exe.run(x=xin)["y"], xin + 30.0, err_msg=f"run {run}, pdl={pdl}")


@needs_gpu
@pytest.mark.parametrize("staging_max", ["0", "4096", "1099511627776"])
def test_staged_and_direct_copies_give_the_same_results(monkeypatch, staging_max):
    """Inputs and outputs of a run travel inside its command buffer, through
    pinned staging up to RLX_CUDA_STAGING_MAX bytes and straight from and to
    the arrays above it. Small and large inputs and outputs in one program,
    with every input new on every run, must be exact at every threshold."""
    monkeypatch.setenv("RLX_CUDA_STAGING_MAX", staging_max)
    monkeypatch.setattr(shim, "_devices", {})   # a device opened with this setting
    g = rlx.Graph()
    small = g.input("small", (7,))
    big = g.input("big", (3, 100_003))
    g.set_outputs(small_out=g.add(small, small), big_out=g.mul(big, g.param("two", (1,))))
    exe = rlx.compile(g, device="cuda", params={"two": np.array([2.0], np.float32)})
    assert exe.program.staged_copies
    rng = np.random.default_rng(0)
    for run in range(5):
        a = rng.standard_normal(7).astype(np.float32)
        b = rng.standard_normal((3, 100_003)).astype(np.float32)
        got = exe.run(small=a, big=b)
        np.testing.assert_array_equal(got["small_out"], a + a, err_msg=f"run {run}")
        np.testing.assert_array_equal(got["big_out"], 2 * b, err_msg=f"run {run}")


@needs_gpu
def test_compile_error_carries_the_nvrtc_log(gpu):
    with pytest.raises(KernelCompileError, match="rlx_no_such_identifier"):
        gpu.compile_library("RLX_KERNEL k() { rlx_no_such_identifier = 1; }\n")


@needs_gpu
def test_device_fault_is_a_device_error(tmp_path):
    # A faulting kernel poisons the CUDA context for the rest of the process
    # (CUDA's sticky errors), so it runs in a child process.
    code = """
        import numpy as np
        from rlx.errors import DeviceError
        from rlx.runtime.shim import CommandBuffer, Device
        SRC = '''
        struct FaultParams { uint n; uint pad[3]; };
        template <typename T>
        RLX_KERNEL fault(RLX_BUF(RLX_DEVICE T *, y, 0), RLX_PARAMS(FaultParams, p, 1) RLX_IDS) {
            RLX_DEVICE T *bad = (RLX_DEVICE T *)(uint64_t)16;
            bad[threadIdx.x * 4096u] = y[0] + (T)p->n;
        }
        RLX_INSTANTIATE(fault, float, fault_f32)
        '''
        dev = Device.open("cuda")
        lib = dev.compile_library(SRC)
        y = dev.alloc(64)
        cb = CommandBuffer(dev)
        cb.set_pipeline(lib.pipeline("fault_f32"))
        cb.set_buffer(0, y)
        cb.set_bytes(1, np.zeros(4, np.uint32).tobytes())
        cb.dispatch((1, 1, 1), (32, 1, 1))
        cb.commit()
        try:
            cb.wait()
            print("NO ERROR")
        except DeviceError as exc:
            print("DEVICE ERROR:", exc)
    """
    out = _run_py(code, str(tmp_path / "cache"))
    assert "DEVICE ERROR:" in out.stdout, out.stdout + out.stderr
    assert "CUDA_ERROR_" in out.stdout


@needs_gpu
def test_missing_binding_is_rejected_before_launch(gpu):
    lib = gpu.builtin_library()
    buf = gpu.alloc(64)
    with CommandBuffer(gpu) as cb:
        cb.set_pipeline(lib.pipeline("binary_f32"))
        cb.set_buffer(0, buf)
        try:
            cb.dispatch((1, 1, 1), (32, 1, 1))  # bindings 1..3 unset
        except rlx.RlxError as exc:
            assert "binding" in str(exc)
        else:  # drivers before CUDA 12.4 cannot count kernel parameters
            pytest.skip("this driver does not report kernel parameter counts")
