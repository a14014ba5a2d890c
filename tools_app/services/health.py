"""Failure breaker and health checks; state lives in the database so every process agrees."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import F
from django.utils import timezone

from tools_app.models import Tool, ToolStatus, ToolType

log = logging.getLogger(__name__)
LAST_ERROR_CHARS = 2000


@transaction.atomic
def record_outcome(*, tool_id: int, ok: bool, error: str = "", tenant_id: int | None = None,
                   started_at: datetime | None = None, protocol_version: str = "") -> None:
    """Success resets the breaker; the Nth consecutive failure opens it for the cooldown.

    A failed call that started before the last failure was recorded (`started_at`) is the same incident, not
    one more failure in a row: when a server process dies, every call in flight on it (in every web process)
    fails at once, and counting each would pause a tool that the pool has already respawned."""
    now = timezone.now()
    # The updates drop invoke's and the gateway's snapshots of this tool (core.hotcache.TenantBumpingQuerySet).
    tools = Tool.objects.in_tenant(tenant_id) if tenant_id is not None else Tool.objects.all()
    if ok:
        # A successful connection also says which MCP revision the server spoke (a call through the pool does not).
        spoke = {"protocol_version": protocol_version[:32]} if protocol_version else {}
        tools.filter(pk=tool_id).update(
            consecutive_failures=0, disabled_until=None, last_ok_at=now, last_checked_at=now, last_error="", **spoke
        )
        return
    rows = tools.filter(pk=tool_id)
    if started_at is not None:
        rows = rows.exclude(consecutive_failures__gt=0, last_checked_at__gt=started_at)
    if not rows.update(
        consecutive_failures=F("consecutive_failures") + 1, last_checked_at=now, last_error=error[:LAST_ERROR_CHARS]
    ):
        return
    tools.filter(pk=tool_id, consecutive_failures__gte=settings.TOOLHUB_BREAKER_THRESHOLD).update(
        disabled_until=now + timedelta(seconds=settings.TOOLHUB_BREAKER_COOLDOWN_S)
    )


def check_tool(tool_id: int) -> bool:
    """Probe one tool (a fresh connection) and record the outcome."""
    from tools_app.services.discovery import probe_and_record

    close_old_connections()
    tool = Tool.objects.filter(pk=tool_id).select_related("tenant").first()
    if tool is None:
        return False
    return probe_and_record(tool).ok


def check_all_tools(*, concurrency: int | None = None) -> dict[str, Any]:
    """Probe every enabled LOCAL/REMOTE tool concurrently (bounded); returns counts."""
    ids = list(
        Tool.objects.filter(status=ToolStatus.ENABLED, type__in=[ToolType.LOCAL, ToolType.REMOTE])
        .values_list("pk", flat=True)
    )
    workers = max(1, min(concurrency or settings.TOOLHUB_HEALTH_CONCURRENCY, len(ids) or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="health") as executor:
        results = list(executor.map(_safe_check, ids))
    return {"checked": len(ids), "ok": sum(results), "failed": len(ids) - sum(results)}


def _safe_check(tool_id: int) -> bool:
    try:
        return check_tool(tool_id)
    except Exception:  # one broken tool must not stop the sweep
        log.exception("health check of tool %s crashed", tool_id)
        return False
    finally:
        close_old_connections()
