"""Calibration cache and cost model. Decisions are checked against synthetic
calibrations (no timing assertions); one real, tiny-budget calibration of
the host checks that the probes produce sane numbers and a cache file."""

from __future__ import annotations

import json
import multiprocessing
import types
import warnings

import numpy as np
import pytest

import rlx
from rlx.runtime.target import Target, host_target
from rlx.tune import calibrate, calibration, cost, decide, work
from rlx.tune.calibration import DEFAULTS, Calibration
from rlx.tune.cost import CostModel
from rlx.tune.decide import Candidate


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RLX_CALIBRATE", raising=False)
    calibration.clear_memo()
    yield
    calibration.clear_memo()


def _synthetic(backend: str = "host", **changes) -> Calibration:
    base = calibration.default_calibration(backend)
    return base.replace(source="measured", **changes)


def _fake_device(hardware_id: str = "fake-hw-1", backend: str = "host", units: int = 4):
    info = types.SimpleNamespace(hardware_id=hardware_id, name="fake device", unified_memory=backend != "cuda",
                                 compute_units=units)
    return types.SimpleNamespace(backend=backend, info=info, blas=None, index=0)


@pytest.fixture
def fake_measure(monkeypatch):
    """Replaces the probes with an instant synthetic measurement; counts calls."""
    calls = []

    def measure(device, *, budget_s=None, progress=None):
        calls.append(device.info.hardware_id)
        calib = calibration.default_calibration(device.backend, device)
        return calib.replace(source="measured", sync_s=1.25e-5, log=[f"synthetic #{len(calls)}"])

    monkeypatch.setattr(calibrate, "measure", measure)
    return calls


# ---- cost model decisions ------------------------------------------------------------------
def _decision_model(call_s: float) -> CostModel:
    # No dispatch overheads, no epilogue, no curves: the row kernel costs its
    # whole passes (row_pass_rows rows each) at 1 GFLOP/s, gemm = call_s +
    # its flops at 100 GFLOP/s.
    return CostModel(_synthetic(gemm_call_s=call_s, dispatch_s=0.0, dispatch_parallel_s=0.0, parallel_units=1,
                                gemm_flops={c: 1e11 for c in calibration.GEMM_CLASSES}, gemm_curves={},
                                row_kernel_flops={"f32": 1e9, "f16": 1e9}, row_kernel_curves={}, row_pass_rows=16))


@pytest.mark.parametrize("call_s", [1e-5, 1e-4, 1e-3])
def test_row_kernel_decision_flips_at_the_predicted_crossover(call_s):
    model = _decision_model(call_s)
    p = model.calibration.row_pass_rows
    margin = cost.ROW_KERNEL_MARGIN
    for m, n in [(1, 8), (4, 4), (8, 2), (16, 1)]:
        # row: 2*p*n*k / 1e9 (one pass); gemm: call_s + 2*m*n*k / 1e11; the
        # row kernel wins below row = margin * gemm.
        crossover_k = margin * call_s / (2 * n * (p / 1e9 - margin * m / 1e11))
        k_below = max(1, int(0.8 * crossover_k))
        k_above = int(1.25 * crossover_k) + 1
        assert model.prefer_row_kernel(m, n, k_below, "f32", epilogue=False), (m, n, k_below)
        assert not model.prefer_row_kernel(m, n, k_above, "f32", epilogue=False), (m, n, k_above)
    assert any("matmul_rows" in line for line in model.describe_decisions())


def test_row_kernel_decision_follows_the_row_kernel_speed():
    fast_rows = CostModel(_synthetic(row_kernel_flops={"f32": 1e13, "f16": 1e13}, row_kernel_curves={},
                                     gemm_call_s=1e-5))
    slow_rows = CostModel(_synthetic(row_kernel_flops={"f32": 1e6, "f16": 1e6}, row_kernel_curves={},
                                     gemm_call_s=1e-5))
    assert fast_rows.prefer_row_kernel(4, 1024, 1024, "f32")
    assert not slow_rows.prefer_row_kernel(4, 1024, 1024, "f32")


def _quant_rates(gemv: float, gemv_m8: float, dequantize: float) -> Calibration:
    base = _synthetic()
    return base.replace(family_rates={**base.family_rates, "quant_gemv": gemv, "quant_gemv_m8": gemv_m8,
                                      "dequantize": dequantize})


def test_quant_gemv_decision_follows_the_calibrated_rates():
    """The fused GEMV or dequantize + gemm for a block-format weight, from
    the quant_gemv / quant_gemv_m8 / dequantize rates: a fast GEMV wins at
    every m <= 8, a slow one loses, and with a GEMV that is fast for one row
    but slow for eight the choice flips in between."""
    q4_k = rlx.DType.of("q4_k")
    fast = CostModel(_quant_rates(1e13, 1e13, 1e8))
    slow = CostModel(_quant_rates(1e6, 1e6, 1e13))
    mixed = CostModel(_quant_rates(1e12, 1e8, 1e11))
    for m in (1, 2, 5, 8):
        assert fast.prefer_quant_gemv(m, 4096, 4096, q4_k, "f32")
        assert not slow.prefer_quant_gemv(m, 4096, 4096, q4_k, "f32")
    assert mixed.prefer_quant_gemv(1, 4096, 4096, q4_k, "f32")
    assert not mixed.prefer_quant_gemv(8, 4096, 4096, q4_k, "f32")
    assert any("fused GEMV" in line for line in fast.describe_decisions())
    assert any("dequantize + gemm" in line for line in slow.describe_decisions())
    # The GEMV's time grows with m between the two calibrated rates.
    times = [mixed.quant_gemv_seconds(m, 4096, 4096, q4_k) for m in range(1, 9)]
    assert times == sorted(times) and times[-1] > 100 * times[0]


def test_quantized_linear_lowering_asks_the_cost_model(monkeypatch):
    """The lowering takes the GEMV only where the decider says so."""
    g = rlx.Graph()
    x = g.input("x", (2, 256))
    g.set_outputs(y=g.linear(x, g.param("w", (64, 256), "q8_0")))
    seen = []

    def decide_no(self, m, n, k, weight_dtype, dtype_name="f32", *, epilogue=False):
        seen.append((m, n, k, weight_dtype.name, dtype_name))
        return False

    monkeypatch.setattr(CostModel, "prefer_quant_gemv", decide_no)
    kernels = [t.kernel or "" for t in decide.lower_for(g, host_target(2, 1 << 34), CostModel(_synthetic()))]
    assert seen == [(2, 64, 256, "q8_0", "f32")]
    assert not any(kn.startswith("gemv") for kn in kernels) and any(kn.startswith("dequantize_q8_0") for kn in kernels)
    monkeypatch.setattr(CostModel, "prefer_quant_gemv", lambda self, *a, **kw: True)
    kernels = [t.kernel or "" for t in decide.lower_for(g, host_target(2, 1 << 34), CostModel(_synthetic()))]
    assert any(kn.startswith("gemv_q8_0") for kn in kernels)


def _row_curves(pass_rate: float, matvec_rate: float) -> dict:
    flat = lambda rate: [[1e4, rate], [1e8, rate]]      # noqa: E731
    return {f"{d}{v}": flat(r) for d in ("f32", "f16")
            for v, r in ((":pass", pass_rate), ("_tb:pass", pass_rate), ("_tb:m1", matvec_rate))}


def test_row_kernel_costs_whole_passes_and_the_matvec_path():
    model = CostModel(_synthetic("cuda", dispatch_s=0.0, dispatch_parallel_s=0.0, row_pass_rows=8,
                                 row_kernel_curves=_row_curves(1e10, 1e11)))
    n, k = 384, 384
    one_pass = n * k / 1e10
    for m in range(1, 9):                  # one pass over the weights covers 8 rows
        assert model.row_kernel_seconds(m, n, k) == pytest.approx(one_pass)
    for m in (9, 12, 16):
        assert model.row_kernel_seconds(m, n, k) == pytest.approx(2 * one_pass)
    assert model.row_kernel_seconds(17, n, k) == pytest.approx(3 * one_pass)
    # M = 1 with weights [N, K]: the mat-vec path at its own rate; [K, N] runs a whole pass.
    assert model.row_kernel_seconds(1, n, k, transpose_b=True) == pytest.approx(n * k / 1e11)
    assert model.row_kernel_seconds(1, n, k, transpose_b=False) == pytest.approx(one_pass)
    assert model.row_kernel_seconds(2, n, k, transpose_b=True) == pytest.approx(one_pass)


def test_row_kernel_costs_later_passes_at_the_many_pass_rate():
    # Past one pass, each pass re-reads its rows of A for every column (out
    # of the first cache level): the ":passes" curve prices them when measured.
    curves = {**_row_curves(1e10, 1e11), "f32_tb:passes": [[1e4, 5e9], [1e8, 5e9]]}
    model = CostModel(_synthetic(dispatch_s=0.0, dispatch_parallel_s=0.0, row_pass_rows=16,
                                 row_kernel_curves=curves))
    n, k = 384, 384
    assert model.row_kernel_seconds(16, n, k, transpose_b=True) == pytest.approx(n * k / 1e10)
    assert model.row_kernel_seconds(17, n, k, transpose_b=True) == pytest.approx(2 * n * k / 5e9)
    assert model.row_kernel_seconds(1024, n, k, transpose_b=True) == pytest.approx(64 * n * k / 5e9)
    assert model.row_kernel_seconds(1024, n, k) == pytest.approx(64 * n * k / 1e10)   # [K, N]: not measured


def test_host_small_m_gemm_probes_keep_their_weights_in_cache():
    # The row-kernel decision compares hot operands on both sides; a probe
    # whose weights stream from memory priced small-M gemms 3x too slow.
    for budget in (0.5, 3.0):
        sizes = calibrate._sizes("host", budget)
        assert all(n * k * 4 <= 2 << 20 for _, n, k in sizes.gemm_small_m)
        assert all(n * k * 4 <= 2 << 20 for n, k in sizes.row_shapes)


def _gpu_like(pass_rate: float, matvec_rate: float) -> CostModel:
    # An H200-like calibration: replayed gemms of a few microseconds at small
    # M, a 1.7 us node, a row kernel whose mat-vec path is fast and whose
    # 8-row pass streams weights slowly.
    return CostModel(_synthetic("cuda", dispatch_s=1e-6, dispatch_parallel_s=1.7e-6, gemm_call_s=1.3e-6,
                                gemm_curves={c: [[1e5, 1e11], [2e6, 1e12], [2e7, 4e12], [5e8, 2e13]]
                                             for c in calibration.GEMM_CLASSES},
                                row_pass_rows=8, row_kernel_curves=_row_curves(pass_rate, matvec_rate),
                                family_rates={f: 1.5e12 for f in calibration.FAMILIES}))


def test_gpu_row_kernel_decision_comes_from_the_calibrated_small_m_numbers():
    slow_pass = _gpu_like(1.5e10, 9e10)
    # As measured on the H200: the mat-vec path beats gemm + epilogue at M = 1
    # (weights [N, K]); at 9 and 16 rows two slow passes lose to the gemm.
    assert slow_pass.prefer_row_kernel(1, 384, 384, "f32", transpose_b=True)
    for m in (9, 16):
        for n, k in ((384, 384), (1536, 384), (384, 1536)):
            assert not slow_pass.prefer_row_kernel(m, n, k, "f32", transpose_b=True), (m, n, k)
            assert not slow_pass.prefer_row_kernel(m, n, k, "f16", transpose_b=False), (m, n, k)
    # The same shapes flip when the numbers say the passes are fast.
    fast_pass = _gpu_like(1e12, 9e10)
    for m in (9, 16):
        assert fast_pass.prefer_row_kernel(m, 384, 384, "f32", transpose_b=True)
    # And M = 1 flips to gemm when the mat-vec path is slow.
    assert not _gpu_like(1.5e10, 1e9).prefer_row_kernel(1, 384, 384, "f32", transpose_b=True)


def _linear_graph(m: int, n: int = 384, k: int = 384) -> rlx.Graph:
    g = rlx.Graph()
    x = g.input("x", (m, k))
    g.set_outputs(y=g.linear(x, g.param("w", (n, k)), g.param("b", (n,)), transpose_b=True))
    return g


def test_gpu_lowering_asks_the_cost_model_not_a_fixed_threshold():
    target = _fake_gpu().target
    for model, m, want in ((_gpu_like(1.5e10, 9e10), 16, "gemm"), (_gpu_like(1e12, 9e10), 16, "matmul_rows"),
                           (_gpu_like(1.5e10, 9e10), 1, "matmul_rows"), (_gpu_like(1.5e10, 1e9), 1, "gemm")):
        fams = [work.family_of(t) for t in decide.lower_for(_linear_graph(m), target, model)]
        assert want in fams and ({"gemm", "matmul_rows"} - {want}).isdisjoint(fams), (m, fams)
    # No calibrated model (a compile inside the probes): the defaults' model
    # decides, with the same shape-by-shape outcome as the H200 measurement.
    for m, want in ((1, "matmul_rows"), (9, "gemm"), (16, "gemm")):
        assert want in [work.family_of(t) for t in decide.lower_for(_linear_graph(m), target, None)], m
    assert cost.decision_model("cuda") is cost.decision_model("cuda")


def test_replay_ranges_count_dispatch_runs_between_gemms():
    G, D = types.SimpleNamespace(kind=1), types.SimpleNamespace(kind=0)
    assert CostModel.replay_ranges([G, D, D, G, D, G, G, D]) == 3
    assert CostModel.replay_ranges([]) == 0 and CostModel.replay_ranges([G, G]) == 0


class _CountingCommands:
    """Stands in for a command buffer: counts the nodes a list would run."""

    def __init__(self):
        self.nodes = 0

    def execute_icb(self, icb, start, count):
        self.nodes += count

    def gemm(self, *a, **k):
        self.nodes += 1

    def barrier(self):
        pass


def test_small_m_probe_replaces_the_default_curves(monkeypatch):
    # The probe's own numbers (synthetic here) replace the defaults' curves
    # of that dtype; they never mix with the defaults' points.
    from rlx.runtime import devices

    dev, _ = devices.open_device("cpu")
    monkeypatch.setattr(calibrate, "time_replayed", lambda exe, thunk, **k: 1e-5)
    defaults = _row_curves(1e10, 1e11)
    calib = _synthetic(row_kernel_curves=defaults, row_pass_rows=16, dispatch_s=0.0, dispatch_parallel_s=0.0)
    sizes = calibrate._sizes("host", 0.5)
    sizes.row_shapes = ((64, 32), (96, 64))
    calibrate._probe_small_m(calib, sizes, 1.0, dev, "f32", 0.0)
    for key in ("f32:pass", "f32_tb:pass", "f32_tb:m1"):
        assert calib.row_kernel_curves[key] == [[64 * 32.0, 64 * 32 / 1e-5], [96 * 64.0, 96 * 64 / 1e-5]], key
    assert calib.row_kernel_curves["f16:pass"] == defaults["f16:pass"]      # another dtype's: untouched
    assert any("small-M f32" in line for line in calib.log)


@pytest.mark.parametrize("repeats", [3, 16, None])
def test_time_replayed_is_the_per_node_slope(monkeypatch, repeats):
    # A synthetic device clock: every list costs 7 us to launch plus 3 us per
    # node; the replay slope must recover the 3 us for dispatches and gemms.
    def fake_run(device, encode):
        cb = _CountingCommands()
        encode(cb)
        return 7e-6 + 3e-6 * cb.nodes

    monkeypatch.setattr(calibrate, "_run_encoded", fake_run)
    # Gemms are encoded by the probe's Program straight into a real command
    # buffer; here each one only counts as a node of the list.
    monkeypatch.setattr(calibrate, "_encode_one", lambda cb, probe, barrier: cb.gemm())
    g = rlx.Graph()
    x = g.input("x", (8, 16))
    g.set_outputs(y=g.softmax(g.matmul(x, g.param("w", (16, 16)))))
    exe = rlx.compile(g, params={"w": np.ones((16, 16), np.float32)})
    kinds = {t.kind for t in exe.thunks}
    assert kinds == {0, 1}
    for thunk in exe.thunks:
        assert calibrate.time_replayed(exe, thunk, repeats=repeats, samples=2) == pytest.approx(3e-6)


def test_probes_encode_through_the_programs_encoder():
    """A thunk of the executable is timed through its own Program; a thunk
    built outside it through a one-thunk Program over the same buffers.
    Both the one-launch and the replayed timing run on the real device."""
    import dataclasses

    g = rlx.Graph()
    x = g.input("x", (8, 16))
    g.set_outputs(y=g.softmax(g.matmul(x, g.param("w", (16, 16)))))
    exe = rlx.compile(g, params={"w": np.ones((16, 16), np.float32)})
    for thunk in exe.thunks:
        program, index = calibrate._probe(exe, thunk)
        assert program is exe.program and exe.thunks[index] is thunk
        copy = dataclasses.replace(thunk)
        program, index = calibrate._probe(exe, copy)
        assert program is not exe.program and index == 0 and program.thunk_count == 1
        for probe in (thunk, copy):
            assert calibrate.time_thunk(exe, probe, repeats=2, samples=2) > 0
            assert calibrate.time_replayed(exe, probe, repeats=2, samples=2) > 0


def test_gemm_curve_interpolates_between_measured_sizes():
    curve = [[1e6, 1e10], [1e8, 1e11]]
    model = CostModel(_synthetic(gemm_call_s=0.0, gemm_curves={"f32_large_m": curve}))
    small, mid, big = (model.gemm_seconds(*s) for s in ((16, 32, 32), (64, 128, 128 * 4), (512, 512, 512)))
    assert small == pytest.approx(2 * 16 * 32 * 32 / 1e10)          # below the curve: its first rate
    assert big == pytest.approx(2 * 512 ** 3 / 1e11)                 # beyond: its last rate
    rate = 2 * 64 * 128 * 512 / mid
    assert 1e10 < rate < 1e11


def test_thunk_and_graph_seconds_of_a_compiled_graph():
    g = rlx.Graph()
    x = g.input("x", (64, 128))
    w = g.param("w", (128, 256))
    b = g.param("b", (256,))
    g.set_outputs(y=g.softmax(g.gelu(g.add(g.matmul(x, w), b))))
    exe = rlx.compile(g, params={"w": np.ones((128, 256), np.float32), "b": np.zeros(256, np.float32)})
    model = CostModel(_synthetic())
    per = [model.thunk_seconds(t) for t in exe.thunks]
    assert all(s > 0 and np.isfinite(s) for s in per)
    assert set(model.breakdown(exe.thunks)) <= set(work.FAMILY_UNITS)
    total = model.graph_seconds(exe.thunks, (64 * 128 * 4, 64 * 256 * 4))
    ranges = model.replay_ranges(exe.thunks)
    assert ranges >= 1
    assert total == pytest.approx(sum(per) + model.calibration.sync_s + model.transfer_seconds(
        (64 * 128 * 4, 64 * 256 * 4)) + ranges * model.calibration.segment_s)


def test_small_m_linear_on_a_gpu_target_is_costed_as_matmul_rows():
    g = rlx.Graph()
    x = g.input("x", (1, 256))
    g.set_outputs(y=g.linear(x, g.param("w", (512, 256)), g.param("b", (512,)), activation="gelu"))
    thunks = decide.lower_for(g, _fake_gpu().target)
    fams = [work.family_of(t) for t in thunks]
    assert "matmul_rows" in fams
    rows = thunks[fams.index("matmul_rows")]
    assert work.thunk_flops(rows) == 2 * 1 * 512 * 256
    model = CostModel(_fake_gpu().calibration)
    assert model.thunk_seconds(rows) == pytest.approx(1e-6 + 2 * 512 * 256 / 1e13)


# ---- device choice ------------------------------------------------------------------------------
def _fake_gpu() -> Candidate:
    # A GPU that is 1000x the CPU's throughput but pays 2 ms per run.
    target = Target("cuda", compute_units=100, max_threads_per_group=1024, simd_width=32, max_buffer_length=1 << 36)
    calib = _synthetic("cuda", sync_s=2e-3, dispatch_s=1e-6, dispatch_parallel_s=1e-6, gemm_call_s=1e-6,
                       gemm_flops={c: 1e14 for c in calibration.GEMM_CLASSES}, gemm_curves={},
                       row_kernel_flops={k: 1e13 for k in ("f32", "f16", "f32_tb", "f16_tb")}, row_kernel_curves={},
                       parallel_units=100,
                       unified_memory=False,
                       family_rates={f: 1e13 for f in calibration.FAMILIES}, h2d_bw=1e10, d2h_bw=1e10)
    return Candidate("fakegpu", target, calib)


def _fake_cpu() -> Candidate:
    calib = _synthetic("host", sync_s=2e-6, dispatch_s=5e-8, dispatch_parallel_s=1e-6, gemm_call_s=1e-6,
                       gemm_flops={c: 1e11 for c in calibration.GEMM_CLASSES}, gemm_curves={},
                       row_kernel_flops={"f32": 1e9, "f16": 1e9}, parallel_units=4,
                       family_rates={f: 1e10 for f in calibration.FAMILIES}, h2d_bw=2e10, d2h_bw=2e10)
    return Candidate("cpu", host_target(4, 1 << 34), calib)


def test_pick_best_device_tiny_graph_stays_on_the_cpu():
    g = rlx.Graph()
    x = g.input("x", (16,))
    g.set_outputs(y=g.add(x, x))
    assert decide.pick_best_device(g, candidates=[_fake_gpu(), _fake_cpu()]) == "cpu"
    assert decide.last_decision[0].endswith("cpu")


def test_pick_best_device_large_graph_goes_to_the_gpu():
    g = rlx.Graph()
    x = g.input("x", (2048, 2048))
    w = g.param("w", (2048, 2048))
    g.set_outputs(y=g.softmax(g.matmul(g.matmul(x, w), w)))
    assert decide.pick_best_device(g, candidates=[_fake_cpu(), _fake_gpu()]) == "fakegpu"
    preds = {p.name: p.seconds for p in decide.predict_devices(g, [_fake_cpu(), _fake_gpu()])}
    assert preds["fakegpu"] < preds["cpu"]


def test_pick_best_device_real_devices_and_auto(monkeypatch):
    monkeypatch.setenv("RLX_CALIBRATE", "0")    # defaults: no probing in this test
    g = rlx.Graph()
    x = g.input("x", (8,))
    g.set_outputs(y=g.add(x, x))
    assert decide.auto_device(g) in {d.name for d in rlx.devices() if d.available}


# ---- cache -----------------------------------------------------------------------------------------
def test_cache_hit_then_hardware_change_is_a_miss(fake_measure):
    dev = _fake_device("fake-hw-1")
    first = calibrate.get_calibration(dev)
    path = calibration.calibration_path(dev)
    assert path.exists() and path.name.startswith("host-calib-fake-hw-1-") and path.suffix == ".json"
    calibration.clear_memo()
    again = calibrate.get_calibration(dev)
    assert fake_measure == ["fake-hw-1"] and again == first      # from the file, not measured
    other = _fake_device("fake-hw-2")
    calibrate.get_calibration(other)
    assert fake_measure == ["fake-hw-1", "fake-hw-2"]
    # A file whose stamp names other hardware (copied between machines) misses too.
    path.write_text(first.replace(hardware_id="someone-else").to_json())
    calibration.clear_memo()
    calibrate.get_calibration(dev)
    assert fake_measure[-1] == "fake-hw-1" and len(fake_measure) == 3
    assert Calibration.from_json(path.read_text()).hardware_id == "fake-hw-1"


def test_two_blas_libraries_on_one_machine_keep_their_own_caches(fake_measure):
    """Two environments (say two virtual environments) whose BLAS differs:
    each measures once, then both hit their own file (no re-measure on
    every compile because the other one overwrote a shared file)."""
    a, b = _fake_device(), _fake_device()
    a.blas, b.blas = "/venv-a/libopenblas.so", "/venv-b/libopenblas.so"
    assert calibration.calibration_path(a) != calibration.calibration_path(b)
    for _ in range(3):
        for dev in (a, b):
            calibration.clear_memo()
            calibrate.get_calibration(dev)
    assert fake_measure == ["fake-hw-1", "fake-hw-1"]


def test_version_or_probe_set_change_is_a_miss(fake_measure, monkeypatch):
    dev = _fake_device()
    calibrate.get_calibration(dev)
    calibration.clear_memo()
    monkeypatch.setattr(calibration, "PROBE_SET", calibration.PROBE_SET + 1)
    calibrate.get_calibration(dev)
    assert len(fake_measure) == 2


@pytest.mark.parametrize("backend", ["host", "cuda"])
def test_a_calibration_measured_on_a_busy_host_is_remeasured_once_quiet(fake_measure, monkeypatch, backend):
    dev = _fake_device(backend=backend)
    calibrate.get_calibration(dev)
    path = calibration.calibration_path(dev)
    busy = Calibration.from_json(path.read_text()).replace(load_per_core=3.0)
    path.write_text(busy.to_json())
    assert "under a load of 3.0 per core" in busy.summary()[0]
    calibration.clear_memo()
    monkeypatch.setattr(calibration, "load_per_core", lambda: 2.0)      # still busy: keep it
    assert calibrate.get_calibration(dev) == busy and len(fake_measure) == 1
    calibration.clear_memo()
    monkeypatch.setattr(calibration, "load_per_core", lambda: 0.2)      # quiet now
    calibrate.get_calibration(dev)
    # Only the host's probes share the cores with the load; a GPU's keep their numbers.
    assert len(fake_measure) == (2 if backend == "host" else 1)


@pytest.mark.parametrize("load, warned", [(1.5, True), (0.3, False)])
def test_measuring_records_the_load_and_warns_when_busy(monkeypatch, capsys, load, warned):
    from rlx.runtime import devices

    dev, _ = devices.open_device("cpu")
    for probe in ("_probe_sync", "_probe_dispatch", "_probe_segments", "_probe_memory", "_probe_transfer",
                  "_probe_gemm", "_probe_families"):
        monkeypatch.setattr(calibrate, probe, lambda *a, **k: None)
    monkeypatch.setattr(calibrate, "load_per_core", lambda: load)
    calib = calibrate.measure(dev, budget_s=0.1, progress=False)
    assert calib.load_per_core == load
    assert ("the machine was busy while calibrating" in capsys.readouterr().err) == warned


def test_cache_of_an_older_probe_set_is_a_quiet_miss(fake_measure):
    dev = _fake_device()
    path = calibration.calibration_path(dev)
    path.parent.mkdir(parents=True)
    old = calibration.default_calibration("host", dev).replace(source="measured").to_dict()
    old["probe_set"] = calibration.PROBE_SET - 1
    del old["row_kernel_curves"]            # an older probe set's fields differ: stale, not corrupt
    path.write_text(json.dumps(old))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calib = calibrate.get_calibration(dev)
    assert fake_measure == ["fake-hw-1"] and calib.probe_set == calibration.PROBE_SET
    assert Calibration.from_json(path.read_text()).probe_set == calibration.PROBE_SET


def test_corrupt_cache_file_warns_and_is_replaced(fake_measure):
    dev = _fake_device()
    path = calibration.calibration_path(dev)
    path.parent.mkdir(parents=True)
    for junk in ('{"schema": 1, "backend": "host"', '{"schema": 1}', "[]", "\x00\xff garbage"):
        path.write_text(junk)
        calibration.clear_memo()
        with pytest.warns(RuntimeWarning, match="corrupt|unreadable"):
            calib = calibrate.get_calibration(dev)
        assert calib.source == "measured"
        assert Calibration.from_json(path.read_text()) == calib
    assert len(fake_measure) == 4


def test_concurrent_writers_leave_a_valid_file(tmp_path):
    path = tmp_path / "shared" / "host-calib-x.json"
    texts = [[_synthetic(sync_s=(w + 1) * 1e-6 + i * 1e-9, log=["x" * 4000]).to_json() for i in range(40)]
             for w in range(3)]
    allowed = {t for ts in texts for t in ts}
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=calibration._write_cache_repeatedly, args=(str(path), t, start)) for t in texts]
    for p in procs:
        p.start()
    start.set()
    seen = 0
    while any(p.is_alive() for p in procs):     # a reader never sees a partial file
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        assert text in allowed
        seen += 1
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    final = path.read_text()
    assert final in allowed
    Calibration.from_json(final)
    assert [p.name for p in path.parent.iterdir()] == [path.name]    # no temp files left behind


def test_calibrate_off_uses_documented_defaults(monkeypatch):
    monkeypatch.setenv("RLX_CALIBRATE", "0")
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: pytest.fail("probed with RLX_CALIBRATE=0"))
    for backend in ("host", "cuda", "metal"):
        dev = _fake_device(backend=backend)
        calib = calibrate.get_calibration(dev)
        assert calib.source == "defaults" and calib.hardware_id == "fake-hw-1"
        assert calib.family_rates == DEFAULTS[backend].family_rates
        assert calib.gemm_flops == DEFAULTS[backend].gemm_flops
        assert not calibration.calibration_path(dev).exists()
    for calib in DEFAULTS.values():
        assert set(calib.family_rates) == set(calibration.FAMILIES)
        assert set(calib.gemm_flops) == set(calibration.GEMM_CLASSES)
        assert Calibration.from_json(calib.to_json()) == calib


# ---- a real (tiny) calibration of the host ------------------------------------------------------
def test_quick_host_calibration_is_sane_and_cached(monkeypatch, capsys):
    from rlx.runtime import devices

    dev, _ = devices.open_device("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calib = calibrate.get_calibration(dev, budget_s=0.5, progress=False)
    assert calib.source == "measured", calib.log
    assert not [line for line in calib.log if "failed" in line], calib.log
    scalars = [calib.sync_s, calib.dispatch_s, calib.dispatch_parallel_s, calib.mem_bw, calib.h2d_bw, calib.d2h_bw]
    assert all(np.isfinite(v) and v > 0 for v in scalars), scalars
    for table in (calib.gemm_flops, calib.row_kernel_flops, calib.family_rates):
        assert table and all(np.isfinite(v) and v > 0 for v in table.values()), table
    assert set(calib.family_rates) == set(calibration.FAMILIES)
    assert calib.segment_s >= 0 and calib.row_pass_rows == 16
    # Replayed small-M probes of the row kernel: one pass per layout, the
    # mat-vec path for weights [N, K], at least the smallest weight size.
    assert {"f32:pass", "f32_tb:pass", "f32_tb:m1", "f16:pass", "f16_tb:pass", "f16_tb:m1"} <= set(
        calib.row_kernel_curves)
    assert all(x > 0 and y > 0 for curve in calib.row_kernel_curves.values() for x, y in curve)
    # Only measured points: the probed weight sizes, none of the defaults'.
    probed = {float(n * k) for n, k in calibrate._sizes("host", 0.5).row_shapes}
    assert all(x in probed for curve in calib.row_kernel_curves.values() for x, _ in curve)
    assert all(calib.gemm_curves[c] for c in calibration.GEMM_CLASSES)
    assert {"f32", "f16", "f32_tb", "f16_tb"} <= set(calib.row_kernel_flops)
    path = calibration.calibration_path(dev)
    assert Calibration.from_json(path.read_text()) == calib
    # Second process-level lookup: from the file, no probes.
    calibration.clear_memo()
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: pytest.fail("re-measured a valid cache"))
    assert calibrate.get_calibration(dev) == calib
    # The CLI shows the cached numbers.
    import argparse

    parser = argparse.ArgumentParser()
    calibrate.add_calibrate_parser(parser.add_subparsers())
    args = parser.parse_args(["calibrate", "--device", "cpu", "--json"])
    assert args.fn(args) == 0
    assert json.loads(capsys.readouterr().out)["hardware_id"] == dev.info.hardware_id
    # A model from it predicts a positive time for a real graph.
    g = rlx.Graph()
    x = g.input("x", (32, 64))
    g.set_outputs(y=g.softmax(x))
    thunks = decide.lower_for(g, host_target(dev.info.compute_units, 1 << 30))
    assert CostModel(calib).graph_seconds(thunks, (32 * 64 * 4, 32 * 64 * 4)) > 0


def test_every_dispatch_declares_its_cost_family():
    """Lowerings declare each dispatch's Work (family, flops): the cost model
    reads it and decodes no params struct."""
    from rlx.blocks import bert_layer, random_params
    from rlx.lowering import DISPATCH

    g = rlx.Graph()
    x = g.input("x", (2, 9, 32))
    g.set_outputs(y=bert_layer(g, x, g.input("mask", (2, 1, 1, 9)), "l0", 4, 64))
    exe = rlx.compile(g, params=random_params(g))
    dispatches = [t for t in exe.thunks if t.kind == DISPATCH]
    assert dispatches and all(t.work is not None and t.work.family in work.FAMILY_UNITS for t in dispatches)
    flop_counted = [t for t in dispatches if work.FAMILY_UNITS[t.work.family] == "flop"]
    assert all(t.work.flops > 0 for t in flop_counted)
