"""The H200 scripts' JSON results: written to the path given, else printed."""

from __future__ import annotations

import json
from pathlib import Path


def emit(result: dict, out_path: str | None) -> None:
    text = json.dumps(result, indent=1)
    if out_path:
        Path(out_path).write_text(text + "\n")
    else:
        print(text)
