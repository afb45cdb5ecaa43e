"""rlx's modules import each other without a cycle: every import counts,
also those inside functions (an import hidden in a function to dodge a
cycle is still a cycle). Layers: models -> api -> tune -> runtime -> opt ->
ir, with reference beside ir (DESIGN.md section 8, "One pipeline")."""

from __future__ import annotations

import ast
from pathlib import Path

import rlx

ROOT = Path(rlx.__file__).parent


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The rlx modules ``name`` imports. ``from pkg import sub`` of a
    submodule depends on the submodule only; a submodule's implicit import
    of its own parent packages is not an edge (Python runs the package's
    __init__ first, which is what imports the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            deps.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            subs = {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in mods}
            deps.update(subs if len(subs) == len(node.names) else subs | {module})
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {d for d in deps if d in mods and d != name and d not in ancestors}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_rlx_has_no_import_cycle():
    mods = _modules()
    edges = {name: _imports(name, path, mods) for name, path in mods.items()}
    assert _cycles(edges) == []


def test_the_check_sees_a_cycle_hidden_in_a_function(tmp_path):
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from rlx.runtime import compiler\n")
    assert "rlx.runtime.compiler" in _imports("rlx.tune.m", mod, _modules())


def test_the_runtime_never_imports_tuning():
    mods = _modules()
    upward = {(name, dep) for name, path in mods.items() if name.startswith(("rlx.runtime", "rlx.opt", "rlx.ir"))
              for dep in _imports(name, path, mods) if dep.startswith(("rlx.tune", "rlx.api", "rlx.models"))}
    assert upward == set()
