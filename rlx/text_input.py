"""The check every text passes before a tokenizer sees it: a Python str that
UTF-8 can encode. JSON's "\\ud800" escapes and Python strings may hold lone
surrogates, which no tokenizer can take (the `tokenizers` library raised a
TypeError deep inside its encode), so they are refused here as an
``InputError`` naming the text and the position."""

from __future__ import annotations

from rlx.errors import InputError


def unicode_problem(text: str) -> str | None:
    """Why ``text`` cannot be encoded as UTF-8 (a lone surrogate and where),
    or None when it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"a lone surrogate U+{ord(text[e.start]):04X} at character {e.start}"
    return None


def require_text(value: object, what: str) -> str:
    """``value`` if it is a str that UTF-8 can encode; else an InputError about ``what``."""
    if not isinstance(value, str):
        raise InputError(f"{what} is a {type(value).__name__}, not a str")
    problem = unicode_problem(value)
    if problem:
        raise InputError(f"{what} is not valid Unicode text: {problem}")
    return value
