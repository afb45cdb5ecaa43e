"""RLX_* variables live in rlx/env.py and the README; `rlx info` works."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlx import cli, env

ROOT = Path(__file__).resolve().parent.parent


def test_every_variable_is_in_the_readme_table():
    readme = (ROOT / "README.md").read_text()
    for var in env.VARIABLES:
        assert re.search(rf"^\| `{var.name}` \| {re.escape(var.default)} \| {re.escape(var.meaning)} \|$",
                         readme, re.M), f"{var.name} missing or stale in README's table"


def test_only_env_py_reads_rlx_variables():
    declared = {v.name for v in env.VARIABLES}
    for path in list((ROOT / "rlx").rglob("*.py")) + list((ROOT / "rlx").rglob("*.pyx")) + [ROOT / "setup.py"]:
        text = path.read_text()
        for name in re.findall(r"\bRLX_[A-Z_]+\b", text):
            if path.name == "env.py" or not re.search(rf"environ[^\n]*\b{name}\b", text):
                continue
            assert path.name == "setup.py", f"{path} reads {name} itself: go through rlx.env"
            assert name in declared, f"setup.py reads undeclared {name}"


def test_num_threads_validation(monkeypatch):
    monkeypatch.setenv("RLX_NUM_THREADS", "0")
    with pytest.raises(env.ConfigError):
        env.num_threads()
    monkeypatch.setenv("RLX_NUM_THREADS", "3")
    assert env.num_threads() == 3


def test_info_text_and_json(capsys):
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert "cpu" in text and "ok" in text and "host BLAS" in text
    assert cli.main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    cpu = next(d for d in data["devices"] if d["name"] == "cpu")
    assert cpu["available"] and cpu["info"]["compute_units"] >= 1
    for backend in ("cuda", "metal"):
        entry = data["shims"][backend]
        assert entry["loaded"] or entry["reason"], f"{backend}: no reason given for not loading"
    assert set(data["environment"]) == {v.name for v in env.VARIABLES}


def test_selftest_passes(capsys):
    assert cli.main(["selftest", "--runs", "2"]) == 0
    assert "MISMATCH" not in capsys.readouterr().out


def test_verbose_compile_reports(monkeypatch, capsys):
    import numpy as np

    import rlx

    monkeypatch.setenv("RLX_VERBOSE", "1")
    g = rlx.Graph()
    x = g.input("x", (3, 4))
    g.set_outputs(y=g.softmax(g.add(x, x)))
    rlx.compile(g).run(x=np.ones((3, 4), np.float32))
    err = capsys.readouterr().err
    assert "2 thunks" in err and "arena" in err and "barriers" in err


def test_shaders_emit_writes_the_metal_source(tmp_path, capsys):
    assert cli.main(["shaders", "--emit", "metal", str(tmp_path)]) == 0
    path = tmp_path / "rlx_kernels.metal"
    text = path.read_text()
    assert "#include <metal_stdlib>" in text and "RLX_INSTANTIATE(softmax, float, softmax_f32)" in text
    assert "[[host_name(#host_name)]]" in text   # the Metal prelude's instantiation macro
    assert cli.main(["shaders", "--emit", "vulkan", str(tmp_path)]) == 2
