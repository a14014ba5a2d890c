"""Saved queries show_data runs by name: defined in code next to the models they read, checked when defined."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from core.errors import InvalidParams
from tools_app.records.args import Query
from tools_app.records.registry import RecordRegistryError


@dataclass(frozen=True)
class SavedQuery:
    name: str
    description: str
    query: dict[str, Any]  # a Query, dumped by alias


_SAVED: dict[str, SavedQuery] = {}


def register_query(name: str, query: dict[str, Any], *, description: str = "") -> SavedQuery:
    """Save `query` (the shape query_records takes) under `name`; it runs as whoever asks, like any query."""
    try:
        parsed = Query.model_validate(query)
    except ValidationError as exc:
        raise RecordRegistryError(f"saved query {name!r} is not a valid query: {exc}") from None
    saved = SavedQuery(name=name, description=description,
                       query=parsed.model_dump(by_alias=True, exclude_none=True, exclude_unset=True))
    _SAVED[name] = saved
    return saved


def saved_queries() -> list[SavedQuery]:
    return sorted(_SAVED.values(), key=lambda s: s.name)


def get_saved_query(name: str) -> SavedQuery:
    saved = _SAVED.get(name)
    if saved is None:
        names = sorted(_SAVED)
        raise InvalidParams(f"no saved query named {name!r}; saved queries: {', '.join(names) or '(none)'}",
                            details={"accepted": names})
    return saved
