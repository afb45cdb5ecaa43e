"""Replace a file so that readers (and other writers) only ever see a whole
old file or a whole new one: a temporary file in the same folder, synced,
then renamed over the target (a rename within one file system is atomic).
Used by every cache and manifest rlx writes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Atomically replace ``path`` with ``data`` (str is written as UTF-8),
    creating its folder; the temporary file is removed on any failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
