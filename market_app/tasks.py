"""Celery tasks of the market: thin, id-based, idempotent."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from core.errors import DomainError
from market_app import selectors, services


@shared_task(name="market.refresh_source")
def refresh_source(source_id: int) -> dict[str, Any]:
    """Refresh one source as the system; a failure is recorded on the source and returned, not raised."""
    try:
        counts = services.source_refresh(source_id=source_id)
    except DomainError as exc:
        return {"ok": False, "error": {"code": exc.code, "message": exc.message}}
    return {"ok": True, **counts}


@shared_task(name="market.dispatch_due_refreshes")
def dispatch_due_refreshes() -> list[int]:
    """Beat: enqueue a refresh for every enabled source whose interval has passed (or never refreshed)."""
    due = selectors.sources_due()
    for source_id in due:
        refresh_source.delay(source_id)
    return due
