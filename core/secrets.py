"""Redact secrets from arguments, results and messages before they are stored or shown."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "********"
SECRET_KEY_RE = re.compile(r"(pass(word|wd)?|secret|token|api[-_]?key|auth(orization)?|credential|private[-_]?key)", re.I)


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of a known secret value in free text (and NULs, which no database stores)."""
    text = text.replace("\x00", "\\x00")
    for value in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON value with secret-looking keys masked and known secret values scrubbed."""
    known = [s for s in secrets if s and len(s) >= 4]
    if isinstance(value, dict):
        return {scrub_text(str(k), ()): MASK if isinstance(k, str) and SECRET_KEY_RE.search(k) and v not in (None, "") else redact(v, known)
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, known) for v in value]
    if isinstance(value, str):
        return scrub_text(value, known)
    return value
