"""The one naming rule for tenant-scoped objects (tools, agents, chat models) and its unique save."""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, models, transaction

from core.errors import DomainError, NameTaken

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
NAME_RE = re.compile(NAME_PATTERN)


def check_name(name: Any, *, what: str, error: type[DomainError]) -> str:
    """`name` if it matches NAME_PATTERN, else `error` naming the rule."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise error(
            f"{what} name {name!r} is invalid; it must match {NAME_PATTERN} "
            "(lowercase letters, digits, '_' and '-', 1-64 characters, starting with a letter or digit)",
            details={"field": "name", "pattern": NAME_PATTERN},
        )
    return name


def save_unique_name(obj: models.Model, *, what: str) -> None:
    """Save; the per-tenant unique constraint on `name` becomes a 409 `name_taken` (no racy pre-check)."""
    try:
        with transaction.atomic():
            obj.save()
    except IntegrityError:
        name = getattr(obj, "name", "")
        raise NameTaken(f"a {what} named {name!r} already exists in this tenant", details={"name": name}) from None
