"""Celery tasks of the tools app: thin, idempotent, id-based. Beat's tasks here; the tasks the services schedule
themselves live with them (`tools_app.services.tasks`, imported here so the worker's autodiscovery registers them)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from tools_app.services import health
from tools_app.services.tasks import refresh_functions


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


@shared_task(name="tools.fold_quota_refusals")
def fold_quota_refusals() -> dict[str, int]:
    """Beat: write the quota refusals counted in Redis into the audit table, one row per key and minute."""
    from tools_app.services.quota_refusals import fold

    return fold()


@shared_task(name="tools.sweep_abandoned_input")
def sweep_abandoned_input() -> int:
    """Beat: end the calls still awaiting input whose caller's requestState expired (the caller never answered)."""
    from tools_app.services.abandoned_input import sweep_abandoned_input as sweep

    return sweep()


@shared_task(name="tools.check_tool")
def check_tool(tool_id: int) -> bool:
    return health.check_tool(tool_id)


__all__ = ["check_tool", "check_tools_health", "expire_approvals", "fold_quota_refusals", "refresh_functions",
           "replay_audit_spool", "sweep_abandoned_input"]
