"""The `rlx` command: `rlx info [--json]`, `rlx selftest [--device D]`."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

import rlx
from rlx import env
from rlx.errors import RlxError


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
        "build": _build_details_safe(),
        "environment": {v.name: {"value": __import__("os").environ.get(v.name), "default": v.default,
                                 "meaning": v.meaning} for v in env.VARIABLES},
        "environment_in_effect": env.in_effect(),
    }


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
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except RlxError as exc:
        print(f"rlx: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
