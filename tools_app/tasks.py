"""Celery tasks of the tools app: thin, idempotent, id-based."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from core.codes import ApiCode
from tools_app.services import health


@shared_task(name="tools.check_health")
def check_tools_health() -> dict[str, Any]:
    """Beat: probe every enabled LOCAL/REMOTE tool and update the breaker."""
    return health.check_all_tools()


@shared_task(name="tools.expire_approvals")
def expire_approvals() -> int:
    """Beat: close pending approvals past their expiry, so held calls never linger as awaiting."""
    from tools_app.services.approvals import approvals_expire_due

    return approvals_expire_due()


@shared_task(name="tools.replay_audit_spool")
def replay_audit_spool() -> dict[str, Any]:
    """Beat: insert the audit rows spooled while the database was away (idempotent, by call_uid)."""
    from tools_app.services.audit_spool import replay

    return replay().as_dict()


@shared_task(name="tools.check_tool")
def check_tool(tool_id: int) -> bool:
    return health.check_tool(tool_id)


@shared_task(name="tools.refresh_functions")
def refresh_functions(tool_id: int) -> dict[str, Any]:
    """Rediscover a tool's functions (after create or a config change) as the system."""
    from tools_app.models import Tool
    from tools_app.services.discovery import rediscover

    tool = Tool.objects.filter(pk=tool_id).select_related("tenant").first()
    if tool is None:
        return {"ok": False, "error": {"code": ApiCode.NOT_FOUND, "message": "tool not found"}}
    return rediscover(tool)
