"""pyproject.toml lists rlx's packages by hand (setuptools installs only
those, plus package data): every package under rlx/ must be in the list,
or a wheel ships without it while an editable install hides the gap
(rlx.splat was missing once)."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_under_rlx_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "rlx").rglob("__init__.py")}
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"
