"""rlx.compile: graph -> Executable.

Order of work: fusion -> siblings -> precision (graph rewrites, rlx/opt) -> lowering,
which elides views per consumer (thunks over storages and views) -> memory
plan (one arena) -> barriers -> segments -> device objects -> Program.
View elision runs inside lowering rather than before precision because
whether a view can be read in place depends on the consuming kernel and on
the dtypes the precision pass settled."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlx import env
from rlx._core import Bindings, Program, ThunkTable
from rlx.errors import ConfigError, GraphError, ParameterError
from rlx.fp8 import expand_params
from rlx.ir.graph import Graph, Node, as_bindings
from rlx.ir.op import get_op
from rlx.lowering import DISPATCH, GEMM, Binding, Lowering, Thunk, place_barriers
from rlx.opt.empty import expand_empty_contractions
from rlx.opt.fusion import fuse
from rlx.opt.memory import ALIGNMENT, Lifetime, MemoryPlan, plan_memory
from rlx.opt.precision import apply_precision
from rlx.opt.segments import Step, segment
from rlx.opt.segments import describe as describe_segments
from rlx.opt.sibling_ropes import CAPABILITY as ROPES_CAPABILITY
from rlx.opt.sibling_ropes import merge_sibling_ropes
from rlx.opt.siblings import CAPABILITY, SiblingReport, merge_siblings, shareable
from rlx.runtime import shim
from rlx.runtime.custom_kernels import library_for
from rlx.runtime.executable import CompileStats, Executable, IOSpec, coerce_param, write_param
from rlx.runtime.target import Target
from rlx.runtime.views import ARENA, RESIDENT, Storage, View

PASSES = ("fusion", "siblings", "views", "precision", "memory_reuse", "segments")
MAX_BINDINGS = 16        # rlx/_core.pyx MAX_BUFFERS: entries of one binding table
# Inputs / outputs below this are copied even where they could be bound:
# a copy that small costs about what the two rebinds do.
BIND_MIN_BYTES = 4096

# A gemm thunk's bindings (Lowering.gemm): its operands and output, then the
# optional ones (None where the gemm has none): bias and FP8 scales.
OPTIONAL_GEMM_OPERANDS = ("bias", "a_scale", "b_scale")
GEMM_OPERANDS = ("a", "b", "c", *OPTIONAL_GEMM_OPERANDS)


class Decider(Protocol):
    """The per-shape choices lowering cannot make alone (rlx/tune/cost.py's
    CostModel implements it): injected by the caller, so the runtime never
    reaches up into calibration."""

    def prefer_row_kernel(self, m: int, n: int, k: int, dtype_name: str = "f32", *, epilogue: bool = True,
                          activation: bool = False, transpose_b: bool = False) -> bool: ...

    def prefer_quant_gemv(self, m: int, n: int, k: int, weight_dtype: Any, dtype_name: str = "f32", *,
                          epilogue: bool = False) -> bool: ...

    def prefer_fft_shared(self, n: int, rows: int, groups: int, stage_passes: int) -> bool: ...

    def describe_decisions(self) -> list[str]: ...


def check_compile_args(graph: Graph, passes: Mapping[str, bool] | None,
                       params: Mapping[str, np.ndarray] | None) -> tuple[dict[str, bool], dict]:
    """rlx.compile's argument checks, before anything else runs: the passes
    switched on, and the params as a dict."""
    if not isinstance(graph, Graph):
        raise GraphError(f"rlx.compile takes an rlx.Graph, got a {type(graph).__name__}")
    if passes is not None and not isinstance(passes, Mapping):
        raise ConfigError(f"passes must be a mapping of pass name -> bool, e.g. {{'fusion': False}}, "
                          f"got a {type(passes).__name__}")
    params = as_bindings(params, ParameterError, "params")
    enabled = dict.fromkeys(PASSES, True)
    for name, on in (passes or {}).items():
        if name not in enabled:
            raise ConfigError(f"unknown pass {name!r}: expected one of {', '.join(PASSES)}")
        enabled[name] = bool(on)
    graph.topo_order()
    graph.validate()
    return enabled, params


@dataclass
class Plan:
    """What the pipeline decided for one graph on one Target, before any
    device object exists: the rewritten graph, its lowering (thunks over
    storages), the output views and the report lines so far."""

    graph: Graph
    lowering: Lowering
    outputs: list[tuple[str, View]]
    siblings: SiblingReport
    fused: dict
    report: list[str]

    @property
    def thunks(self) -> list[Thunk]:
        return self.lowering.thunks


def plan_graph(graph: Graph, target: Target, decider: Decider, *, precision: str = "f32",
               enabled: Mapping[str, bool] | None = None, report: list[str] | None = None) -> Plan:
    """The pipeline up to thunks, pure Python over a Target: empty
    contractions -> fusion -> siblings -> precision -> lowering with view
    elision, then the output copies. rlx.compile builds its executable from
    this Plan, and the cost model prices the same Plan for device="auto"."""
    enabled = dict.fromkeys(PASSES, True) if enabled is None else dict(enabled)
    report = [] if report is None else report
    graph, n_empty = expand_empty_contractions(graph)
    if n_empty:
        report.append(f"empty contractions: {n_empty} matmul/linear over K = 0 became zeros (plus bias)")
    fused: dict = {}
    if enabled["fusion"]:
        graph, fusion_report = fuse(graph, target.capabilities)
        fused = dict(fusion_report.fused)
        report.append(fusion_report.describe())
    siblings = SiblingReport()
    if enabled["fusion"] and enabled["siblings"] and CAPABILITY in target.capabilities:
        graph, siblings = merge_siblings(graph)   # before precision: merged params convert like any other
        report.append(siblings.describe())
        if ROPES_CAPABILITY in target.capabilities:
            graph, n_ropes = merge_sibling_ropes(graph)
            if n_ropes:
                report.append(f"sibling ropes: {n_ropes} query/key rmsnorm_rope pairs -> one dispatch each")
    if enabled["precision"]:
        graph, precision_report = apply_precision(graph, precision, target.backend)
        report.append(precision_report.describe())
    elif precision != "f32":
        raise ConfigError(f"precision={precision!r} needs the precision pass, which is switched off")
    lw = Lowering(graph, target, decider, elide_views=enabled["views"], precision=precision)
    lw.run(graph.topo_order())
    if env.verbose():
        report.extend(decider.describe_decisions())
    report.append(f"views: {lw.copies_avoided} view ops lowered to no thunk"
                  if enabled["views"] else "views: elision off, every view op copies")
    for node in graph.inputs.values():       # declared but unused: still accepted
        if node not in lw.views:
            lw.views[node] = lw.new_value(node)
            lw.inputs[node.attrs["name"]] = lw.views[node].storage
    outputs = [(name, _output_view(lw, name, node)) for name, node in graph.outputs.items()]
    return Plan(graph, lw, outputs, siblings, fused, report)


def compile_graph(graph: Graph, dev, target: Target, decider: Decider,
                  params: Mapping[str, np.ndarray] | None = None, *, precision: str = "f32",
                  passes: Mapping[str, bool] | None = None, pin_outputs: bool = True, replay: bool | None = None,
                  share_params_with: Executable | None = None, report: list[str] | None = None) -> Executable:
    """rlx.compile (rlx/api.py) once the device is open and the decider
    chosen: plan_graph, then the memory plan, barriers, segments and the
    device objects. The arguments are rlx.compile's."""
    enabled, params = check_compile_args(graph, passes, params)
    planned = plan_graph(graph, target, decider, precision=precision, enabled=enabled, report=report)
    graph, lw, outputs, siblings, report = (planned.graph, planned.lowering, planned.outputs, planned.siblings,
                                            planned.report)
    order = graph.topo_order()
    input_storages = [lw.inputs[name] for name in graph.inputs]

    output_storages = [v.storage for _, v in outputs]
    plan, lifetimes = _plan_arena(lw, input_storages, output_storages, target.max_buffer_length, pin_outputs,
                                  reuse=None if enabled["memory_reuse"] else False)
    report.append(f"memory: {plan.describe()}")
    shared = _share_params(lw, graph, dev, share_params_with)
    resident_bytes = _layout_resident(lw.storages)
    barriers = place_barriers(lw.thunks)
    report.append(f"lowering: {len(lw.thunks)} thunks, {barriers} barriers")
    use_replay = (env.replay() if replay is None else replay) and enabled["segments"]
    plan_segments = segment([Step(t.kind == GEMM, True, frozenset(id(s) for s, _, _ in t.reads),
                                  frozenset(id(s) for s, _, _ in t.writes)) for t in lw.thunks],
                            frozenset(id(s) for s in output_storages))
    report.append(describe_segments(plan_segments) if use_replay else "segments: off, every thunk encoded per run")

    arena = dev.alloc(max(plan.total_bytes, ALIGNMENT))
    resident = dev.alloc(max(resident_bytes, ALIGNMENT))
    if lw.params_region.nbytes:
        arena.write(lw.params_region.offset, lw.params_blob)
    values = siblings.param_values(graph, params or {}, shared.slots)
    values = expand_params(values, {name: node.dtype for name, node in graph.params.items()})   # precision="fp8"
    param_slots = siblings.alias_slots(_bind_resident(lw, graph, resident, values, shared))
    state_slots = _bind_states(lw, graph, resident, shared)

    bindings = {ARENA: arena, RESIDENT: resident, **shared.buffers}
    bound = _bound_io(lw, dev, arena, input_storages, outputs, MAX_BINDINGS - len(bindings))
    bindings.update({name: buf for name, buf in bound.values()})
    bound_names = {key: name for key, (name, _) in bound.items()}
    libraries = _libraries(dev, lw.thunks)
    table = pack_thunks(lw.thunks, libraries, Bindings(tuple(bindings)), bound_names)
    program = Program(
        dev.shim.api_address, dev.address, table, {name: buf.address for name, buf in bindings.items()},
        [(s.offset, s.nbytes, bound_names.get(id(s))) for s in input_storages],
        [(v.storage.offset + v.byte_offset, v.numel * v.dtype.itemsize, bound_names.get(id(v.storage)))
         for _, v in outputs],
        replay=use_replay, segments=[seg.as_tuple() for seg in plan_segments] if use_replay else None,
        keepalive=(bindings, libraries), explore_launch=explores_launch(dev),
    )
    stats = CompileStats(
        nodes=len(order), thunks=len(lw.thunks), fused=planned.fused,
        dispatches=sum(t.kind == DISPATCH for t in lw.thunks), gemms=sum(t.kind == GEMM for t in lw.thunks),
        barriers=barriers, segments=program.segment_count, arena_bytes=plan.total_bytes,
        arena_no_reuse_bytes=plan.naive_bytes, resident_bytes=resident_bytes, outputs_pinned=plan.pinned)
    exe = Executable(
        program=program, device=dev, target=target, arena=arena, resident=resident,
        input_specs=[IOSpec(name, tuple(n.shape), n.dtype) for name, n in graph.inputs.items()],
        output_specs=[IOSpec(name, v.shape, v.dtype) for name, v in outputs],
        param_slots=param_slots, state_slots=state_slots, index_checks=_index_checks(graph, order), stats=stats,
        plan=plan,
        thunks=lw.thunks, thunk_table=table, bindings=bindings, lifetimes=lifetimes, compile_report=report,
        graph=graph, segments=plan_segments)
    if env.verbose():
        print("rlx.compile:\n  " + "\n  ".join("\n".join(report).splitlines()) +
              f"\n  total: {stats.nodes} nodes -> {stats.thunks} thunks ({stats.dispatches} dispatches, "
              f"{stats.gemms} gemms), {stats.barriers} barriers, {stats.segments} segments, "
              f"arena {plan.total_bytes} B, resident {resident_bytes} B", file=sys.stderr)
    return exe


def _output_view(lw: Lowering, name: str, node: Node) -> View:
    """Outputs are copied out of the arena from one dense range; anything
    else (a strided view, a parameter) is materialized first."""
    view = lw.views[node]
    if view.is_dense and view.storage.slot == ARENA:
        return view
    out = lw.new_value(node, tuple(view.shape), view.dtype)
    lw.emit_copy(f"output '{name}'", view, out)
    return out


def _plan_arena(lw: Lowering, inputs: list[Storage], outputs: list[Storage], max_bytes: int,
                pin_outputs: bool, reuse: bool | None = None) -> tuple[MemoryPlan, list[Lifetime]]:
    """Lifetimes in thunk steps. Inputs and the params region live for the
    whole run. Outputs live to the end; pinned, they are also never shared
    with values that died before them, so their bytes stay theirs across
    runs. If that does not fit the device, re-plan without the pin."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for step, thunk in enumerate(lw.thunks):
        touched = [b.storage for b in thunk.bindings] + [s for s, _, _ in thunk.reads + thunk.writes]
        if thunk.gemm:
            touched += [thunk.gemm[k].storage for k in GEMM_OPERANDS if thunk.gemm.get(k)]
        for storage in touched:
            first.setdefault(id(storage), step)
            last[id(storage)] = step
    end = max(len(lw.thunks) - 1, 0)
    always = {id(s) for s in inputs} | {id(lw.params_region)}
    out_ids = {id(s) for s in outputs}

    def lifetimes(pin: bool) -> list[Lifetime]:
        # An input is live from before the first thunk whatever the pin says,
        # also when it is an output too (or an output is a dense view of it):
        # its bytes hold the caller's data from the start of the run.
        result = []
        for s in lw.storages:
            if s.slot != ARENA:
                continue
            start, stop = first.get(id(s), 0), last.get(id(s), 0)
            is_output = id(s) in out_ids
            result.append(Lifetime(id(s), s.nbytes, start, end if is_output else stop,
                                   fixed=id(s) in always or (is_output and pin)))
        return result

    used = lifetimes(pin_outputs)
    plan = plan_memory(used, pin=False, reuse=reuse)
    plan.pinned = pin_outputs
    if plan.total_bytes > max_bytes:
        used = lifetimes(False)
        plan = plan_memory(used, pin=False, max_bytes=max_bytes, reuse=reuse)
        plan.pinned = False
    for s in lw.storages:
        if s.slot == ARENA:
            s.offset = plan.offsets[id(s)]
    return plan, used


def _bound_io(lw: Lowering, dev, arena, inputs: list[Storage], outputs: list[tuple[str, View]],
              room: int) -> dict[int, tuple[str, object]]:
    """The inputs and outputs a run reads / writes in the caller's arrays
    (RLX_BIND_IO; shims that wrap host memory: the host): id(storage) ->
    (binding name, a wrapped buffer over the value's arena bytes, where it
    rests between runs). A value qualifies when it is one IO entry's whole
    storage (so no other entry copies it through the arena), of at least
    BIND_MIN_BYTES; an input also when no thunk writes it (the caller's
    array is read-only to us). The largest go first, ``room`` at most (the
    binding table's entries left)."""
    if not env.bind_io() or room <= 0 or arena.host_address is None or not dev.can_wrap:
        return {}
    entries: dict[int, list] = {}
    for s in inputs:
        entries.setdefault(id(s), []).append(("input", s, s.nbytes))
    for _, v in outputs:
        whole = v.byte_offset == 0 and v.numel * v.dtype.itemsize == v.storage.nbytes
        entries.setdefault(id(v.storage), []).append(("output" if whole else "part", v.storage, v.storage.nbytes))
    written = {id(st) for t in lw.thunks for st, _, _ in t.writes}
    written |= {id(t.gemm["c"].storage) for t in lw.thunks if t.gemm}
    chosen = []
    for key, uses in entries.items():
        if len(uses) != 1:
            continue
        kind, storage, nbytes = uses[0]
        if kind == "part" or storage.slot != ARENA or nbytes < BIND_MIN_BYTES or (kind == "input" and key in written):
            continue
        chosen.append((nbytes, kind, storage))
    chosen.sort(key=lambda c: -c[0])
    bound = {}
    for i, (nbytes, kind, storage) in enumerate(chosen[:room]):
        bound[id(storage)] = (f"{kind} {i}", dev.wrap(arena.host_address + storage.offset, nbytes))
    return bound


def _layout_resident(storages: list[Storage]) -> int:
    offset = 0
    for s in storages:
        if s.slot == RESIDENT:
            s.offset = offset
            offset += -(-max(s.nbytes, 1) // ALIGNMENT) * ALIGNMENT
    return offset


@dataclass
class _Shared:
    """Params read from another executable's resident buffers."""
    slots: dict = field(default_factory=dict)     # name -> (spec, buffer, offset)
    state_slots: dict = field(default_factory=dict)   # the same for states
    buffers: dict = field(default_factory=dict)   # binding name -> one of those buffers


def _share_params(lw: Lowering, graph: Graph, dev, source: Executable | None) -> _Shared:
    shared = _Shared()
    if source is None:
        return shared
    if source.device is not dev:
        raise ParameterError("share_params_with: the executable belongs to another device")
    names = {}   # id(buffer) -> its binding name
    for tensor in lw.resident:
        slots = source._state_slots if tensor.state else source._param_slots
        if tensor.value is not None or tensor.name not in slots:
            continue
        node = (graph.states if tensor.state else graph.params)[tensor.name]
        spec, buffer, offset = slots[tensor.name]
        if spec.shape != tuple(node.shape) or spec.dtype != node.dtype or not shareable(buffer):
            continue
        name = names.setdefault(id(buffer), f"shared params {len(names)}")
        shared.buffers[name] = buffer
        tensor.storage.slot, tensor.storage.offset = name, offset
        (shared.state_slots if tensor.state else shared.slots)[tensor.name] = (spec, buffer, offset)
    return shared


def _bind_resident(lw: Lowering, graph: Graph, resident, params: Mapping[str, np.ndarray], shared: _Shared) -> dict:
    declared = {t.name for t in lw.resident if t.value is None and not t.state}
    unknown = sorted(set(params) - set(graph.params))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {unknown}; the graph declares {sorted(graph.params)}")
    missing = sorted(declared - set(params) - set(shared.slots))
    if missing:
        raise ParameterError(f"missing value for parameter(s) {missing}; pass them as rlx.compile(..., params=...)")
    slots = dict(shared.slots)
    for tensor in lw.resident:
        if tensor.value is not None:
            resident.write(tensor.storage.offset, tensor.value)
            continue
        if tensor.state:
            continue   # _bind_states
        node = graph.params[tensor.name]
        spec = IOSpec(tensor.name, tuple(node.shape), node.dtype)
        if tensor.name in shared.slots:
            continue   # read from the other executable; a value given here is not used
        write_param(resident, tensor.storage.offset, coerce_param(spec, params[tensor.name]), params[tensor.name])
        slots[tensor.name] = (spec, resident, tensor.storage.offset)
    return slots


def _bind_states(lw: Lowering, graph: Graph, resident, shared: _Shared) -> dict:
    """name -> (spec, buffer, byte offset) of every state: another
    executable's (share_params_with), or this one's own, zero-filled."""
    slots = dict(shared.state_slots)
    for tensor in lw.resident:
        if not tensor.state or tensor.name in slots:
            continue
        node = graph.states[tensor.name]
        spec = IOSpec(tensor.name, tuple(node.shape), node.dtype)
        resident.write(tensor.storage.offset, np.zeros(spec.shape, node.dtype.numpy))
        slots[tensor.name] = (spec, resident, tensor.storage.offset)
    return slots


def _index_checks(graph: Graph, order: list[Node]) -> list[tuple[int, int, str]]:
    """Gather indices that come straight from a graph input (through views)
    are range-checked in Python before each run; out-of-range indices would
    otherwise read outside the table on a GPU."""
    positions = {node: i for i, node in enumerate(graph.inputs.values())}
    checks = []
    for node in order:
        if node.op != "gather":
            continue
        src = node.inputs[1]
        while get_op(src.op).is_view:
            src = src.inputs[0]
        if src in positions:
            checks.append((positions[src], node.inputs[0].shape[0], repr(node)))
    return checks


def explores_launch(dev) -> bool:
    """Whether a program on dev times its schedules with and without launch
    overlap over its first runs (RLX_CUDA_PDL=auto; only CUDA overlaps)."""
    return dev.shim.backend == "cuda" and env.cuda_pdl_auto()


def _libraries(dev, thunks: list[Thunk]) -> dict:
    """The built-in library, plus each user kernel library the schedule uses
    (compiled once per device and source, then cached)."""
    libraries = {None: dev.builtin_library()}
    for t in thunks:
        if t.source is not None and t.source not in libraries:
            libraries[t.source] = library_for(dev, t.source)
    return libraries


def pack_thunks(thunks: list[Thunk], libraries: dict, bindings: Bindings,
                bound: Mapping[int, str] | None = None) -> ThunkTable:
    """Lowering's thunks as a ThunkTable over ``bindings`` (the names their
    storages' slots use); ``libraries``: source -> Library (``_libraries``);
    ``bound``: id(storage) -> the binding of its wrapped buffer (_bound_io),
    for values read / written in the caller's arrays."""
    bound = bound or {}

    def _binding(b: Binding) -> tuple[str, int]:
        name = bound.get(id(b.storage))
        return (name, b.offset) if name is not None else (b.storage.slot, b.storage.offset + b.offset)

    table = ThunkTable(bindings)
    for t in thunks:
        if t.kind == DISPATCH:
            pipeline = libraries[t.source].pipeline(t.kernel, shim.PIPELINE_INDIRECT)
            # Kernels are correct for any group size, so a pipeline whose limit is
            # below the device's (register pressure) just gets smaller groups.
            tx = max(1, min(t.threads[0], pipeline.max_threads_per_group or t.threads[0]))
            by_value = t.params is not None and pipeline.takes_by_value(len(t.bindings) - 1)
            table.append_dispatch(pipeline.address, [_binding(b) for b in t.bindings], t.groups,
                                  (tx, t.threads[1], t.threads[2]), barrier=t.barrier, params=t.params,
                                  params_by_value=by_value)
            continue
        g = t.gemm
        osa, osb, osc = g["outer_strides"]
        table.append_gemm(
            a=_binding(g["a"]), b=_binding(g["b"]), c=_binding(g["c"]), m=g["m"], n=g["n"], k=g["k"],
            lda=g["lda"], ldb=g["ldb"], ldc=g["ldc"], trans_a=bool(g["trans_a"]), trans_b=bool(g["trans_b"]),
            dtype=g["dtype"], alpha=g["alpha"], beta=g["beta"], batch=g["batch"], stride_a=g["stride_a"],
            stride_b=g["stride_b"], stride_c=g["stride_c"], outer=g["outer"], outer_stride_a=osa,
            outer_stride_b=osb, outer_stride_c=osc, b_dtype=g["b_dtype"], c_dtype=g["c_dtype"],
            scale_mode=g.get("scale_mode", 0),
            **{key: _binding(g[key]) if g.get(key) else None for key in OPTIONAL_GEMM_OPERANDS},
            barrier=t.barrier)
    return table


def thunk_program(exe: Executable, thunks: list[Thunk], extra: Mapping | None = None, *,
                  replay: bool = False) -> Program:
    """A Program of ``thunks`` over ``exe``'s own buffers (plus ``extra``:
    binding name -> buffer, for thunks built by hand), with no inputs or
    outputs: what calibration probes time a thunk that is not one of the
    executable's through (``Program.encode_one`` / ``record_one``)."""
    bindings = {**exe.bindings, **(extra or {})}
    libraries = _libraries(exe.device, thunks)
    table = pack_thunks(thunks, libraries, Bindings(tuple(bindings)))
    return Program(exe.device.shim.api_address, exe.device.address, table,
                   {name: buf.address for name, buf in bindings.items()}, [], [], replay=replay,
                   keepalive=(exe, bindings, libraries))
