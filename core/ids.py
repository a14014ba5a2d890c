"""One rule for database ids from the outside: an integer in the range every backend stores (1 .. 2**63-1)."""

from __future__ import annotations

from typing import Any

MAX_ID = 2**63 - 1


def as_id(value: Any) -> int | None:
    """The id `value` names, or None when it cannot name a row (not an integer, or out of range).

    Out-of-range numbers would otherwise reach the database driver and fail there (SQLite raises
    OverflowError for anything past 64 bits), turning a typo into a 500.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    else:
        text = str(value).strip()
        if not text or len(text) > 20:
            return None
        try:
            number = int(text)
        except ValueError:
            return None
    return number if 1 <= number <= MAX_ID else None
