"""The health sweep: probe every enabled LOCAL/REMOTE tool (or one) and record the outcome (the breaker is
tools_app.services.breaker). Above discovery."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from tools_app.models import Tool, ToolStatus, ToolType
from tools_app.services.discovery import probe_and_record

log = logging.getLogger(__name__)


def check_tool(tool_id: int) -> bool:
    """Probe one tool (a fresh connection) and record the outcome."""
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
