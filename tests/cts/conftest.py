"""The conformance suite's fixtures: every test that takes `backend` (or
`device`, `lib`) runs once per shim. A shim that does not load or has no
device here skips with its reason; what a backend does not support skips
with the reason backends.UNSUPPORTED gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlx.runtime import shim
from rlx.runtime.shim import Device

from .backends import UNSUPPORTED

HERE = Path(__file__).resolve().parent
_KEY = re.compile(r"(\w+)(?:\[(\w+)=([^\]]*)\])?")


def _backend_params():
    params = []
    for name, st in shim.shim_status().items():
        usable = st["loaded"] and st["reason"] is None
        marks = () if usable else pytest.mark.skip(reason=f"{name} shim not usable here: {st['reason']}")
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.fixture(params=_backend_params())
def backend(request) -> str:
    return request.param


@pytest.fixture
def device(backend) -> Device:
    return shim.open_device(backend, 0)


@pytest.fixture
def lib(device):
    return device.builtin_library()


# ---- backends.UNSUPPORTED -> skips -------------------------------------------------
def _check_table() -> None:
    """Every key names a concept file or a test function (and one of its
    arguments) of this suite, so the table cannot go stale."""
    concepts, signatures = set(), {}
    for path in HERE.glob("test_*.py"):
        concepts.add(path.stem[len("test_"):])
        for name, args in re.findall(r"^def (test_\w+)\(([^)]*)\)", path.read_text(), re.M):
            signatures[name] = re.findall(r"\w+", args)
    for backend, entries in UNSUPPORTED.items():
        for key in entries:
            m = _KEY.fullmatch(key)
            name, arg = m.group(1, 2) if m else (None, None)
            known = name in concepts or (name in signatures and (arg is None or arg in signatures[name]))
            if not known:
                raise pytest.UsageError(f"tests/cts/backends.py: {backend}: {key!r} names no test of tests/cts")


def _unsupported(item) -> str | None:
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    entries = UNSUPPORTED.get(params.get("backend"), {})
    for key, reason in entries.items():
        name, arg, value = _KEY.fullmatch(key).groups()
        if name in (item.path.stem[len("test_"):], item.originalname) and (
                arg is None or (arg in params and str(params[arg]) == value)):
            return reason
    return None


def pytest_collection_modifyitems(config, items):
    _check_table()
    for item in items:
        if HERE in item.path.parents:
            reason = _unsupported(item)
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"{item.callspec.params['backend']}: {reason}"))
