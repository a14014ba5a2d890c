"""The failure breaker: consecutive failures of a tool open it for a cooldown, a success closes it. State lives in
the database so every process agrees. Below invoke, discovery and the health sweep, which all report outcomes."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from tools_app.models import Tool

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
