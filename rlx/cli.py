"""The `rlx` command: `rlx info [--json]`, `rlx selftest [--device D]`,
`rlx embed TEXT... [--file F] [-o out.npy]`, `rlx serve [--model M] [--port P]`, `rlx bench bert`,
`rlx gguf info FILE`."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

import rlx
from rlx import env
from rlx.errors import RlxError, UnsupportedOpError


def _build_details() -> dict:
    import Cython  # noqa: F401  (only to report the version when present)

    details = {"rlx": rlx.__version__, "python": platform.python_version(), "platform": platform.platform(),
               "numpy": np.__version__}
    try:
        details["cython"] = Cython.__version__
    except AttributeError:
        pass
    return details


def info_dict() -> dict:
    from rlx.runtime import devices as devmod
    from rlx.runtime import shim

    devs = devmod.devices()
    host = next((d for d in devs if d.backend == "host" and d.available), None)
    blas = None
    if host is not None:
        blas = shim.open_device("host", 0).blas
    return {
        "version": rlx.__version__,
        "devices": [d.__dict__ for d in devs],
        "shims": {k: dict(v, path=str(v["path"]) if v.get("path") else None) for k, v in shim.shim_status().items()},
        "host_blas": blas,
        "calibration": _calibration_status(devs),
        "build": _build_details_safe(),
        "environment": {v.name: {"value": os.environ.get(v.name), "default": v.default,
                                 "meaning": v.meaning} for v in env.VARIABLES},
        "environment_in_effect": env.in_effect(),
    }


def _calibration_status(devs) -> dict:
    """Per usable device: the calibration cache file and whether it exists."""
    from rlx.runtime import shim
    from rlx.tune import calibration

    out = {}
    for d in devs:
        if d.available:
            path = calibration.calibration_path(shim.open_device(d.backend, 0))
            out[d.name] = {"path": str(path), "cached": path.exists()}
    return out


def _build_details_safe() -> dict:
    try:
        return _build_details()
    except ImportError:
        return {"rlx": rlx.__version__, "python": platform.python_version(), "numpy": np.__version__}


def cmd_info(args: argparse.Namespace) -> int:
    data = info_dict()
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    print(f"rlx {data['version']}")
    print("devices:")
    for d in data["devices"]:
        if d["available"]:
            i = d["info"]
            print(f"  {d['name']:<6} ok    {i['name']} ({i['compute_units']} units, "
                  f"max buffer {i['max_buffer_length'] / 2**30:.1f} GiB, hw id {i['hardware_id']})")
        else:
            print(f"  {d['name']:<6} --    {d['reason']}")
    print("shims:")
    for name, s in data["shims"].items():
        state = "loaded" if s["loaded"] else f"not loaded: {s['reason']}"
        print(f"  {name:<6} {state}" + (f" ({s['path']})" if s.get("path") and s["loaded"] else ""))
    print(f"host BLAS: {data['host_blas'] or 'none (built-in fallback gemm)'}")
    for name, c in data["calibration"].items():
        state = "cached" if c["cached"] else "not measured yet (`rlx calibrate --device " + name + "`)"
        print(f"calibration {name}: {state} ({c['path']})")
    print("build: " + ", ".join(f"{k} {v}" for k, v in data["build"].items()))
    effect = data["environment_in_effect"]
    print("environment: " + (", ".join(f"{k}={v}" for k, v in effect.items()) if effect else "no RLX_* set"))
    return 0


def _selftest_graph():
    g = rlx.Graph()
    x = g.input("x", (4, 16, 64))
    w1 = g.param("w1", (64, 256))
    b1 = g.param("b1", (256,))
    w2 = g.param("w2", (256, 64))
    ln_w = g.param("ln_w", (64,))
    ln_b = g.param("ln_b", (64,))
    h = g.gelu(g.add(g.matmul(x, w1), b1))
    y = g.add(g.matmul(h, w2), x)
    y = g.layernorm(y, ln_w, ln_b)
    scores = g.softmax(g.matmul(y, g.transpose(y, (0, 2, 1))))
    g.set_outputs(y=y, scores=scores)
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((64, 256), np.float32) * 0.1, "b1": rng.standard_normal(256, np.float32),
              "w2": rng.standard_normal((256, 64), np.float32) * 0.1, "ln_w": np.ones(64, np.float32),
              "ln_b": np.zeros(64, np.float32)}
    inputs = {"x": rng.standard_normal((4, 16, 64), np.float32)}
    return g, params, inputs


def cmd_selftest(args: argparse.Namespace) -> int:
    """Compile a small transformer-style block, run it and compare with the
    numpy reference."""
    g, params, inputs = _selftest_graph()
    t0 = time.perf_counter()
    exe = rlx.compile(g, device=args.device, params=params)
    t1 = time.perf_counter()
    out = exe.run(inputs)
    times = []
    for _ in range(args.runs):
        s = time.perf_counter()
        exe.run(inputs)
        times.append(time.perf_counter() - s)
    ref = rlx.run_reference(g, inputs, params)
    print(f"device {args.device or env.default_device()}: {exe}")
    print(f"compile {1e3 * (t1 - t0):.1f} ms, run median {1e3 * float(np.median(times)):.3f} ms over {args.runs}")
    ok = True
    for name in ref:
        err = float(np.max(np.abs(out[name] - ref[name])))
        good = err < 1e-3
        ok &= good
        print(f"  {name}: max |rlx - reference| = {err:.2e} {'ok' if good else 'MISMATCH'}")
    return 0 if ok else 1


class _Progress:
    """A one-line progress bar on stderr (no dependency); silent when stderr is not a terminal
    unless forced."""

    def __init__(self, total: int, label: str, force: bool = False, width: int = 30) -> None:
        self.total, self.label, self.width = total, label, width
        self.enabled = force or sys.stderr.isatty()
        self.start = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        frac = done / max(total, 1)
        fill = int(round(frac * self.width))
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\r{self.label} [{'#' * fill}{'.' * (self.width - fill)}] {done}/{total} "
                         f"({rate:.1f}/s){end}")
        sys.stderr.flush()


def _unwritable(path: str, folder: bool = False) -> str | None:
    """Why ``path`` cannot be written, or None; tried for real (permissions
    alone miss a read-only file system, /proc, or root's exemptions) before a
    command's long work, so that a bad -o fails at once rather than after
    the results exist. A folder is created (its parents too) and left, empty;
    a file is opened for appending, and removed again if it is new."""
    try:
        if folder:
            Path(path).mkdir(parents=True, exist_ok=True)
            return None
        existed = os.path.exists(path)
        with open(path, "ab"):
            pass
        if not existed:
            os.unlink(path)
    except OSError as e:
        return e.strerror or str(e)
    return None


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\r\n") for line in f if line.strip()]
    except OSError as e:
        raise RlxError(f"--file {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise RlxError(f"--file {path}: not UTF-8 text ({e})") from None


def cmd_embed(args: argparse.Namespace) -> int:
    """Embed texts with a BERT sentence embedder; print them or save a .npy."""
    import warnings

    from rlx.models import load_embedder

    if args.ray or args.input:
        return _embed_ray(args)
    texts = list(args.texts)
    if args.file:
        texts += _read_lines(args.file)
    if not texts:
        print("rlx embed: error: give texts as arguments or --file F (one text a line)", file=sys.stderr)
        return 2
    if args.batch_size < 1:
        print("rlx embed: error: --batch-size must be >= 1", file=sys.stderr)
        return 2
    if args.output:   # before the model loads and the texts are embedded, not after
        problem = _unwritable(args.output if args.output.endswith(".npy") else args.output + ".npy")
        if problem:
            print(f"rlx embed: error: -o {args.output}: {problem}", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    model = load_embedder(args.model, device=args.device, precision=args.precision)
    t1 = time.perf_counter()
    progress = None
    if args.file and len(texts) > args.batch_size:
        progress = _Progress(len(texts), "embedding", force=args.progress)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        emb = model.encode(texts, batch_size=args.batch_size, progress=progress)
    for w in caught:
        print(f"rlx embed: warning: {w.message}", file=sys.stderr)
    t2 = time.perf_counter()
    print(f"rlx embed: {len(texts)} text(s) -> {emb.shape[0]} x {emb.shape[1]} float32 with {model!r}; "
          f"load {1e3 * (t1 - t0):.0f} ms, encode {1e3 * (t2 - t1):.0f} ms "
          f"({model.compiles} compile(s))", file=sys.stderr)
    if args.output:
        try:
            np.save(args.output, emb)
        except OSError as e:   # a full disk, say: say so without a traceback
            print(f"rlx embed: error: -o {args.output}: {e.strerror or e}", file=sys.stderr)
            return 1
        print(f"wrote {args.output} ({emb.shape[0]} x {emb.shape[1]} float32)", file=sys.stderr)
        return 0
    for text, vec in zip(texts, emb):
        shown = text if len(text) <= 40 else text[:37] + "..."
        head = ", ".join(f"{v:+.6f}" for v in vec[:args.show])
        tail = ", ..." if len(vec) > args.show else ""
        print(f"{json.dumps(shown, ensure_ascii=False)}: [{head}{tail}] dim {len(vec)} norm "
              f"{float(np.linalg.norm(vec)):.4f}")
    return 0


def _embed_ray(args: argparse.Namespace) -> int:
    """`rlx embed --ray --input CORPUS --output DIR`: a corpus on Ray actors,
    one Parquet part per block, resumable (rlx/integrations/ray.py)."""
    from rlx.integrations.ray import embed_corpus

    wrong = ("--input CORPUS goes with --ray (texts alone: arguments or --file)" if not args.ray
             else "--ray needs --input CORPUS and --output DIR" if not (args.input and args.output)
             else "--ray reads texts from --input only (not from arguments or --file)" if args.texts or args.file
             else None)
    if wrong:
        print(f"rlx embed: error: {wrong}", file=sys.stderr)
        return 2
    progress = _Progress(0, "blocks", force=True)

    def log(msg: str) -> None:
        print(f"rlx embed: {msg}", file=sys.stderr, flush=True)

    summary = embed_corpus(args.input, args.output, text_column=args.text_column, vector_column=args.vector_column,
                           model=args.model, device=args.device, precision=args.precision, actors=args.actors,
                           batch_size=args.batch_size, block_rows=args.block_rows, address=args.ray_address,
                           overwrite=args.overwrite, cpus_per_actor=args.cpus_per_actor,
                           gpus_per_actor=args.gpus_per_actor, retries=args.retries, progress=progress, log=log)
    log(f"{summary['embedded']} block(s) embedded in {summary['seconds']:.1f} s, {summary['skipped']} skipped "
        f"(already done); {summary['rows']} rows in {summary['blocks']} part(s) under {summary['output']}")
    return 0


def cmd_calibrate_fp8(args: argparse.Namespace) -> int:
    """GPTQ-calibrated FP8 weights for a BERT model, saved as an FP8 checkpoint."""
    from rlx.models import BertModel
    from rlx.models.fp8_calibration import calibrate_fp8, check_new_folder, save_fp8

    check_new_folder(args.output)   # before the calibration's minute, not after it
    problem = _unwritable(args.output, folder=True)   # save_fp8 writes into the empty folder
    if problem:
        print(f"rlx calibrate-fp8: error: -o {args.output}: {problem}", file=sys.stderr)
        return 2
    texts = _read_lines(args.file) if args.file else None
    t0 = time.perf_counter()
    model = BertModel.load(args.model)
    progress = _Progress(model.config.num_hidden_layers, "calibrating layers", force=args.progress)
    calibrated = calibrate_fp8(model, texts, device=args.device, damp=args.damp, progress=progress)
    out = save_fp8(calibrated, args.output)
    print(f"rlx calibrate-fp8: {len(calibrated.fp8_weights)} e4m3 weights in {time.perf_counter() - t0:.1f} s; "
          f"wrote {out} (use: rlx embed --model {out} --precision fp8)", file=sys.stderr)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from rlx.models import bench_bert

    peers = tuple(p.strip() for p in args.peers.split(",") if p.strip())
    bad = [p for p in peers if p not in bench_bert.PEERS]
    if bad:
        print(f"rlx bench: error: unknown peer(s) {bad}; choose from {', '.join(bench_bert.PEERS)}", file=sys.stderr)
        return 2
    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    log(f"rlx bench bert: {args.model or 'all-MiniLM-L6-v2'}, batch x tokens "
        f"{', '.join(f'{b}x{t}' for b, t in bench_bert.CASES)}")
    report = bench_bert.run_benchmark(args.model, peers=peers, threads=args.threads, precision=args.precision,
                                      budget=args.budget, device=args.device, log=log)
    print(bench_bert.format_report(report))
    if args.profile:
        _print_profile(args, bench_bert)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": _command_line(), **report}, f, indent=2)
    return 0


def _command_line() -> str:
    """The command that made a results file, as a user would type it."""
    return " ".join(["rlx", *(shlex.quote(a) for a in sys.argv[1:])])


def _print_profile(args: argparse.Namespace, bench_bert) -> None:
    from rlx.models.bert import resolve_model_path

    folder = resolve_model_path(args.model)
    for b, t in bench_bert.CASES:
        _, facts = bench_bert.make_runner("rlx", folder, b, t, args.threads or env.num_threads(), args.precision,
                                          device=args.device)
        rows = bench_bert.profile_thunks(facts["executable"], repeats=3 if b * t > 1000 else 20)
        total = sum(r["ms"] for r in rows)
        print(f"\nrlx {b} x {t}: {len(rows)} thunks, {total:.2f} ms summed when each runs alone; top costs:")
        for kind, count, ms in bench_bert.summarize_profile(rows, top=8):
            print(f"  {kind:<40} x{count:<3} {ms:9.3f} ms  {100 * ms / max(total, 1e-9):5.1f}%")


def cmd_shaders(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlx.shaders_cli import emit

    target, out_dir = args.emit
    print(emit(target, Path(out_dir)))
    return 0


def _short_value(value, limit: int = 60) -> str:
    """A metadata value on one line: long lists as their length, type and first items."""
    if isinstance(value, list):
        kinds = sorted({type(v).__name__ for v in value}) or ["empty"]
        head = repr(value[:3])[:-1] + (", ...]" if len(value) > 3 else "]")
        text = f"[{len(value)} x {'/'.join(kinds)}] {head}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def cmd_gguf_info(args: argparse.Namespace) -> int:
    """Summary of a GGUF file: metadata, then one line per tensor."""
    from collections import Counter

    import rlx.gguf

    with rlx.gguf.open(args.file) as f:
        tensors = list(f.tensors.values())
        total = sum(t.nbytes for t in tensors)
        print(f"{f.path}: GGUF v{f.version}, architecture {f.architecture or '(none)'}, {len(f.metadata)} metadata "
              f"keys, {len(tensors)} tensors, {total / 2**20:.1f} MiB of tensor data (alignment {f.alignment})")
        print("metadata:")
        for key, value in f.metadata.items():
            print(f"  {key} = {_short_value(value)}")
        by_type = Counter(t.type for t in tensors)
        print("tensor types: " + ", ".join(f"{name} x{n}" for name, n in sorted(by_type.items())))
        width = max([len(t.name) for t in tensors] + [4])
        print(f"  {'name':<{width}}  {'type':<7} {'shape':<20} {'bytes':>12}")
        for t in tensors:
            print(f"  {t.name:<{width}}  {t.type:<7} {str(t.shape):<20} {t.nbytes:>12}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """Streams the model's continuation of the prompt to stdout; tokens/s on
    stderr. Ctrl-C stops after the current token."""
    from rlx.models.llm import load_llm, print_stats

    t0 = time.perf_counter()
    llm = load_llm(args.model, device=args.device, max_context=args.max_context, kv_dtype=args.kv_dtype,
                   decode_block=args.decode_block, prefill_precision=args.prefill_precision)
    print(f"[{llm.path.name}: {llm.config.architecture}, {llm.config.n_layers} layers; KV cache "
          f"{llm.kv_cache_bytes / 2**20:.1f} MiB for {llm.max_context} tokens; loaded in "
          f"{time.perf_counter() - t0:.2f} s]", file=sys.stderr)
    kwargs = {"max_tokens": args.max_tokens, "temperature": args.temperature, "top_k": args.top_k,
              "top_p": args.top_p, "min_p": args.min_p, "repetition_penalty": args.repetition_penalty,
              "seed": args.seed, "stop": args.stop or ()}
    n_prompt = len(llm.tokenizer.encode(args.prompt))
    if n_prompt > 256:
        print(f"[prefill: {n_prompt} prompt tokens ...]", file=sys.stderr, flush=True)
    stream = (llm.chat([{"role": "user", "content": args.prompt}], template=args.chat_template, **kwargs)
              if args.chat or args.chat_template else llm.generate(args.prompt, **kwargs))
    try:
        for piece in stream:
            sys.stdout.write(piece)
            sys.stdout.flush()
    except KeyboardInterrupt:
        print("\n[stopped]", file=sys.stderr)
    print()
    print_stats(llm.stats)
    return 0


def cmd_bench_llm(args: argparse.Namespace) -> int:
    from rlx.models import bench_llm

    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    bad = [e for e in engines if e not in bench_llm.ENGINES]
    if bad:
        print(f"rlx bench llm: error: unknown engine(s) {bad}; choose from {', '.join(bench_llm.ENGINES)}",
              file=sys.stderr)
        return 2
    report = bench_llm.run_benchmark(args.model, prompt_tokens=args.prompt_tokens, gen=args.gen, ctx=args.context,
                                     threads=args.threads or env.num_threads(), device=args.device,
                                     engines=engines, prefill_precision=args.prefill_precision,
                                     rounds=args.rounds, log=lambda m: print(m, file=sys.stderr))
    print(bench_llm.format_report(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": _command_line(), **report}, f, indent=2)
    return 0


def cmd_splat_render(args: argparse.Namespace) -> int:
    """Render a 3DGS .ply from every camera of a camera list into PNGs."""
    from pathlib import Path

    from rlx.splat import Renderer, read_cameras, read_ply
    from rlx.splat.png import to_uint8, write_png

    try:
        bg = tuple(float(v) for v in args.background.split(","))
    except ValueError:
        bg = ()
    if len(bg) != 3:
        print("rlx splat render: error: --background takes r,g,b (three numbers in [0, 1])", file=sys.stderr)
        return 2
    problem = _unwritable(args.output, folder=True)   # created before the scene loads and frames render
    if problem:
        print(f"rlx splat render: error: -o {args.output}: {problem}", file=sys.stderr)
        return 2
    out = Path(args.output)
    scene = read_ply(args.scene)
    cams = read_cameras(args.camera)
    renderers: dict[tuple[int, int], Renderer] = {}
    progress = _Progress(len(cams), "rendering", force=args.progress)
    t0 = time.perf_counter()
    pairs = 0
    for i, cam in enumerate(cams):
        w = args.width or cam.width
        h = args.height or cam.height
        if not w or not h:
            print(f"rlx splat render: error: camera {cam.name!r} has no width/height; pass --width and --height",
                  file=sys.stderr)
            return 2
        if (w, h) not in renderers:
            renderers[(w, h)] = Renderer(scene, w, h, device=args.device, background=bg, capacity=args.capacity,
                                         max_alpha=args.max_alpha, depth_and_alpha=args.alpha or args.depth)
        frame = renderers[(w, h)].render(cam)
        pairs += frame.pairs
        stem = f"{i:04d}" + (f"_{Path(cam.name).stem}" if cam.name and cam.name != str(i) else "")
        write_png(out / f"{stem}.png", to_uint8(frame.rgb))
        if args.alpha:
            write_png(out / f"{stem}_alpha.png", to_uint8(frame.alpha))
        if args.depth:
            # Depth normalized by alpha, scaled to the frame's range (near: white).
            d = frame.depth / np.maximum(frame.alpha, 1e-6)
            hit = frame.alpha > 1e-3
            lo, hi = (float(d[hit].min()), float(d[hit].max())) if hit.any() else (0.0, 1.0)
            write_png(out / f"{stem}_depth.png", to_uint8(np.where(hit, 1.0 - (d - lo) / max(hi - lo, 1e-9), 0.0)))
        progress(i + 1, len(cams))
    dt = time.perf_counter() - t0
    print(f"{len(cams)} frames of {scene.count} Gaussians in {dt:.2f} s ({len(cams) / dt:.2f} frames/s, "
          f"{pairs / max(len(cams), 1):.0f} pairs a frame) -> {out}", file=sys.stderr)
    return 0


def _cannot_listen(host: str, port: int) -> str | None:
    """Why a server could not listen on (host, port): a port out of range,
    a host that does not resolve, an address in use; None when a test bind
    succeeds (the socket is closed again at once)."""
    import socket

    if not 0 <= port <= 65535:
        return "the port must be in 0..65535"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as uvicorn binds
            sock.bind(address)
    except OSError as e:   # socket.gaierror included
        return str(e)
    return None


def cmd_serve(args: argparse.Namespace) -> int:
    """An OpenAI-compatible embeddings and/or text generation server (rlx.serve) under uvicorn."""
    import warnings

    from rlx.models.bert import DEFAULT_MODEL
    from rlx.serve import ServeConfig

    try:
        import uvicorn

        from rlx.serve.app import create_app
    except ImportError as e:
        print(f"rlx serve: error: the server needs the 'serve' extra (pip install 'rlx[serve]'): {e}",
              file=sys.stderr)
        return 2
    problem = _cannot_listen(args.host, args.port)   # before minutes of loading, not after
    if problem:
        print(f"rlx serve: error: cannot listen on {args.host}:{args.port}: {problem}", file=sys.stderr)
        return 2
    embed = args.model is not None or args.llm is None   # with --llm alone, no embedding model
    config = ServeConfig(model_name=args.model_name or args.model or DEFAULT_MODEL, max_batch=args.max_batch,
                         max_wait_ms=args.max_wait_ms, max_queue=args.max_queue, max_inputs=args.max_inputs,
                         max_chars=args.max_chars, max_batch_tokens=args.max_batch_tokens or None,
                         llm_name=args.llm_name or _llm_id(args.llm), max_tokens=args.max_tokens,
                         max_gen_queue=args.max_gen_queue, chat_template=args.chat_template)
    served, model, llm = [], None, None
    t0 = time.perf_counter()
    if embed:
        from rlx.models import load_embedder

        model = load_embedder(args.model, device=args.device, precision=args.precision, cache_size=args.cache_size)
        # Truncation to the model's length is the documented behaviour (docs/serving.md); a warning per
        # request would only flood the log.
        warnings.filterwarnings("ignore", message=r".*tokens and were truncated")
        if args.warmup:
            model.encode(["warm up"] * args.max_batch, batch_size=args.max_batch)
            model.encode(["warm up"], batch_size=args.max_batch)
        served.append(f"embeddings {config.model_name!r} ({model!r})")
    if args.llm is not None:
        from rlx.models.llm import load_llm

        llm = load_llm(args.llm, device=args.llm_device or args.device, max_context=args.max_context)
        if args.warmup:   # the first prefill bucket and the decode step, greedy and sampled
            for temperature in (0.0, 1.0):
                for _ in llm.generate("warm up", max_tokens=2, temperature=temperature, seed=0):
                    pass
        try:
            chat = llm.chat_template(config.chat_template).name
        except UnsupportedOpError as e:   # completions still serve; chat requests answer 400 with this
            chat = "none"
            print(f"rlx serve: warning: {e}", file=sys.stderr)
        served.append(f"generation {config.llm_name!r} ({llm.path.name}, {llm.config.n_layers} layers, "
                      f"context {llm.max_context}, chat template {chat})")
    print(f"rlx serve: loaded in {time.perf_counter() - t0:.1f} s; serving {'; '.join(served)} "
          f"on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    uvicorn.run(create_app(model, config, llm), host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _chat_template_arg(p: argparse.ArgumentParser) -> None:
    from rlx.models.chat_template import TEMPLATES

    p.add_argument("--chat-template", default=None, choices=list(TEMPLATES), metavar="NAME",
                   help="chat template in place of the model's own (implies --chat for generate): "
                        + ", ".join(TEMPLATES))


def _llm_id(llm: str | None) -> str:
    """The id clients use for --llm: a known name as given, a file's name without .gguf."""
    if llm is None:
        return "llm"
    from pathlib import Path

    from rlx.models.llm import KNOWN_MODELS

    return llm if llm.lower() in KNOWN_MODELS else Path(llm).name.removesuffix(".gguf")


def _positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (argparse prints the error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _add_prefill_precision(p: argparse.ArgumentParser) -> None:
    """--prefill-precision, as `rlx generate` and `rlx bench llm` take it (LLM's prefill_precision)."""
    p.add_argument("--prefill-precision", choices=("f32", "bf16"), default="f32",
                   help="rlx's prompt gemms: f32 (default) or bf16 (CPU only; bf16 tiles of the weights)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rlx", description="rlx ML runtime")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="devices, shims, build details and RLX_* variables")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(fn=cmd_info)
    p = sub.add_parser("selftest", help="run a small block on a device and compare with numpy")
    p.add_argument("--device", default=None, help="cpu (default), cuda, metal")
    p.add_argument("--runs", type=int, default=20)
    p.set_defaults(fn=cmd_selftest)
    p = sub.add_parser("embed", help="sentence embeddings with a BERT model (default all-MiniLM-L6-v2)")
    p.add_argument("texts", nargs="*", help="texts to embed")
    p.add_argument("--file", "-f", help="a UTF-8 file with one text a line (blank lines skipped)")
    p.add_argument("-o", "--output",
                   help="write the embeddings to this .npy file instead of printing (with --ray: the parts' folder)")
    p.add_argument("--device", default=None, help="cpu (default), cuda, metal")
    p.add_argument("--precision", choices=("f32", "f16", "bf16", "fp8", "fp8-dynamic"), default="f32",
                   help="f32 (default); f16 (GPUs); bf16 (CPU: linear weights in bf16); fp8 (e4m3 linear "
                        "weights), fp8-dynamic (and e4m3 activations); see docs/compile.md")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--model", default=None, help="model folder or name (default: all-MiniLM-L6-v2)")
    p.add_argument("--show", type=int, default=6, help="values printed per embedding")
    p.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a tty")
    g = p.add_argument_group("a corpus on Ray (needs rlx[ray]; see docs/ray.md)")
    g.add_argument("--ray", action="store_true",
                   help="embed --input on Ray actors into Parquet parts under --output (a folder); resumable")
    g.add_argument("--input", help="the corpus: a .parquet or .jsonl file with a text column")
    g.add_argument("--text-column", default="text", help="the corpus column holding the texts (default text)")
    g.add_argument("--vector-column", default="embedding", help="the output column of vectors (default embedding)")
    g.add_argument("--actors", type=int, default=1, help="Ray actors, each with its own embedder (default 1)")
    g.add_argument("--block-rows", type=int, default=4096,
                   help="rows per block; each block is one output part, the unit a rerun skips (default 4096)")
    g.add_argument("--cpus-per-actor", type=float, default=1,
                   help="CPUs Ray reserves per actor; its rlx threads (default 1)")
    g.add_argument("--gpus-per-actor", type=float, default=None,
                   help="GPUs Ray reserves per actor (with --device cuda)")
    g.add_argument("--retries", type=int, default=3,
                   help="restarts of a dead actor, and reruns of the batches it held (default 3)")
    g.add_argument("--ray-address", default=None,
                   help="the Ray cluster to join (auto: the running one; default: start a local one)")
    g.add_argument("--overwrite", action="store_true",
                   help="delete the parts of a previous run in --output instead of resuming it")
    p.set_defaults(fn=cmd_embed)
    p = sub.add_parser("calibrate-fp8", help="GPTQ-rounded e4m3 weights for a BERT model, saved as an FP8 "
                                             "checkpoint folder")
    p.add_argument("-o", "--output", required=True, help="the new checkpoint folder (must not exist, or be empty)")
    p.add_argument("--model", default=None, help="model folder or name (default: all-MiniLM-L6-v2)")
    p.add_argument("--file", "-f", help="calibration texts, one a line (default: rlx's 64 built-in sentences)")
    p.add_argument("--device", default="cpu", help="where the f32 model runs to measure its inputs (default cpu)")
    p.add_argument("--damp", type=float, default=0.3, help="GPTQ damping, a fraction of H's mean diagonal")
    p.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a tty")
    p.set_defaults(fn=cmd_calibrate_fp8)
    p = sub.add_parser("serve", help="OpenAI-compatible server: /v1/embeddings, /v1/completions, "
                                     "/v1/chat/completions (needs rlx[serve])")
    p.add_argument("--model", default=None,
                   help="embedding model folder or name (default: all-MiniLM-L6-v2; none with --llm alone)")
    p.add_argument("--model-name", default=None, help="the id clients use (default: --model)")
    p.add_argument("--llm", default=None, help="a GGUF LLM to generate with: a .gguf file or a known name "
                                               "(gemma3-270m); serves /v1/completions and /v1/chat/completions")
    p.add_argument("--llm-name", default=None, help="the id clients use for --llm (default: its name)")
    p.add_argument("--llm-device", default=None, help="device of the LLM (default: --device)")
    p.add_argument("--max-context", type=int, default=2048,
                   help="LLM KV cache length: prompt and completion tokens together (default 2048)")
    p.add_argument("--max-tokens", type=int, default=2048,
                   help="tokens a generation request may ask for, and the default (default 2048)")
    p.add_argument("--max-gen-queue", type=int, default=64,
                   help="generation requests waiting for the LLM before 429 (default 64)")
    _chat_template_arg(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, metal")
    p.add_argument("--precision", choices=("f32", "f16", "bf16"), default="f32")
    p.add_argument("--max-batch", type=int, default=64, help="texts per encode call (default 64)")
    p.add_argument("--max-wait-ms", type=float, default=5.0,
                   help="how long the oldest queued text waits for a batch to fill while traffic is concurrent "
                        "(default 5; a lone request never waits)")
    p.add_argument("--max-queue", type=int, default=1024, help="queued texts before 429 (default 1024)")
    p.add_argument("--max-batch-tokens", type=int, default=8192,
                   help="rows x longest text's tokens per encode call (default 8192; 0: no budget)")
    p.add_argument("--max-inputs", type=int, default=2048, help="texts per request (default 2048)")
    p.add_argument("--max-chars", type=int, default=32768, help="characters per text (default 32768)")
    p.add_argument("--cache-size", type=int, default=32,
                   help="compiled (batch, length) buckets kept (default 32: mixed traffic uses many)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="skip compiling the smallest and largest batch (and the LLM's first steps) before listening")
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug", "trace"),
                   help="uvicorn's log level (default warning)")
    p.set_defaults(fn=cmd_serve)
    from rlx.tune.calibrate import add_calibrate_parser

    add_calibrate_parser(sub)
    p = sub.add_parser("shaders", help="write the exact kernel source a device compiles")
    p.add_argument("--emit", nargs=2, metavar=("TARGET", "DIR"), required=True,
                   help="TARGET: metal, cuda or cpu; DIR: where rlx_kernels.<metal|cu|cpp> goes")
    p.set_defaults(fn=cmd_shaders)
    p = sub.add_parser("gguf", help="GGUF files (llama.cpp's format): gguf info FILE")
    gsub = p.add_subparsers(dest="action", required=True)
    p = gsub.add_parser("info", help="metadata and the table of tensors (name, type, shape, bytes)")
    p.add_argument("file", help="a .gguf file")
    p.set_defaults(fn=cmd_gguf_info)
    p = sub.add_parser("bench", help="benchmarks against peers (bench bert)")
    bsub = p.add_subparsers(dest="suite", required=True)
    p = bsub.add_parser("bert", help="BERT encoder latency: rlx vs PyTorch CPU vs ONNX Runtime CPU")
    p.add_argument("--device", default="cpu", help="rlx device (peers run on the CPU)")
    p.add_argument("--precision", choices=("f32", "f16", "bf16"), default="f32", help="rlx precision (peers: f32)")
    p.add_argument("--model", default=None, help="model folder or name (default: all-MiniLM-L6-v2)")
    p.add_argument("--threads", type=int, default=None, help="threads for every peer (default RLX_NUM_THREADS)")
    p.add_argument("--peers", default=",".join(("rlx", "torch", "ort")))
    p.add_argument("--budget", type=float, default=3.0, help="seconds of timed runs per peer and case")
    p.add_argument("--profile", action="store_true", help="also time each rlx thunk alone and list the top costs")
    p.add_argument("--json", help="also write the raw results to this file")
    p.set_defaults(fn=cmd_bench)
    p = bsub.add_parser("llm", help="GGUF LLM tokens/s: rlx vs llama.cpp (llama-cpp-python), own processes")
    p.add_argument("--model", default="gemma3-270m", help="a .gguf file or a known name (default gemma3-270m)")
    p.add_argument("--device", default="cpu", help="rlx device (llama.cpp runs on the CPU)")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--gen", type=int, default=256, help="tokens generated (greedy; EOS does not stop them)")
    p.add_argument("--context", type=int, default=None, help="context both engines allocate (default: fits)")
    p.add_argument("--threads", type=int, default=None, help="threads for both (default RLX_NUM_THREADS)")
    p.add_argument("--engines", default=",".join(("rlx", "llama.cpp")))
    p.add_argument("--rounds", type=_positive_int, default=1,
                   help="run the engines this many times, taking turns going first; the ratios are the median "
                        "of the rounds' (default 1)")
    _add_prefill_precision(p)
    p.add_argument("--json", help="also write the results to this file")
    p.set_defaults(fn=cmd_bench_llm)
    p = sub.add_parser("generate", help="generate text from a GGUF LLM (streams to stdout; tokens/s on stderr)")
    p.add_argument("prompt")
    p.add_argument("--model", default="gemma3-270m", help="a .gguf file or a known name (default gemma3-270m)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, metal")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--max-context", type=int, default=2048, help="KV cache length in tokens (default 2048)")
    _add_prefill_precision(p)
    p.add_argument("--kv-dtype", choices=("f32", "f16"), default=None,
                   help="KV cache dtype (default f32; f16 halves the cache bytes)")
    p.add_argument("--decode-block", type=int, default=None,
                   help="greedy steps a launch, 1-16 (default: 4 on GPUs, 1 on the CPU)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy")
    p.add_argument("--top-k", type=int, default=0,
                   help="0 (default): no top-k (the logits row is copied to the host each token); "
                        "1-256: penalty and top-k run on the device, k values copied a token")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stop", action="append", help="a stop string (repeatable)")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    _chat_template_arg(p)
    p.set_defaults(fn=cmd_generate)
    p = sub.add_parser("splat", help="3D Gaussian Splatting: splat render SCENE.ply --camera CAMS -o DIR")
    ssub = p.add_subparsers(dest="action", required=True)
    p = ssub.add_parser("render", help="render a 3DGS .ply from each camera into PNGs")
    p.add_argument("scene", help="a 3DGS .ply file")
    p.add_argument("--camera", "-c", required=True,
                   help="a JSON camera list (viewmat or 3DGS cameras.json) or a COLMAP text model folder")
    p.add_argument("-o", "--output", required=True, help="folder for the PNGs (created)")
    p.add_argument("--width", type=int, default=None, help="image width (default: the camera's)")
    p.add_argument("--height", type=int, default=None, help="image height (default: the camera's)")
    p.add_argument("--device", default=None, help="cpu (default), cuda, metal")
    p.add_argument("--background", default="0,0,0", help="r,g,b in [0, 1] (default 0,0,0)")
    p.add_argument("--capacity", type=int, default=None, help="(tile, Gaussian) pairs to plan for (grows as needed)")
    p.add_argument("--max-alpha", type=float, default=0.99,
                   help="clamp of each Gaussian's alpha, in (0, 1) (default 0.99 as in 3DGS; gsplat: 0.999)")
    p.add_argument("--depth", action="store_true", help="also write NNNN_depth.png")
    p.add_argument("--alpha", action="store_true", help="also write NNNN_alpha.png")
    p.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a tty")
    p.set_defaults(fn=cmd_splat_render)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except RlxError as exc:
        print(f"rlx: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
