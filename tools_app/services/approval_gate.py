"""The approval gate invoke consults: which calls need a person, what a held call answers, and holding one (an
audit row awaiting approval plus a pending Approval). Below invoke; deciding is tools_app.services.approvals
(above invoke), a server's mid-call questions tools_app.services.client_request_holds.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.secrets import scrub_text
from tenants_app.models import Tenant
from tools_app import selectors
from tools_app.configs import secret_values
from tools_app.models import (
    Approval,
    ApprovalStatus,
    ApprovalVia,
    CallStatus,
    ExpiryReason,
    Tool,
    ToolFunction,
)
from tools_app.runtime import approval_policy
from tools_app.runtime import result as codes
from tools_app.runtime.plugin import ApprovalCard
from tools_app.runtime.result import ToolResult
from tools_app.runtime.schemas import canonical_json
from tools_app.services.audit import audit


def needs_approval(tool: Tool, fn: ToolFunction | None, link_flag: bool | None = None) -> bool:
    """The approval rule (tools_app.runtime.approval_policy) applied to a tool and one of its functions."""
    return approval_policy.needs_approval(
        function_flag=fn.requires_approval if fn is not None else None,
        link_flag=link_flag,
        tool_flag=tool.requires_approval,
        # The function's own safety (override, annotations, tool); an admin's override replaces the hints.
        safety=fn.safety if fn is not None else tool.safety,
        annotations=fn.annotations if fn is not None and not fn.safety_override else None,
    )


def _function_safety(tool: Tool, function: str) -> str:
    fn = ToolFunction.objects.filter(tool=tool, name=function).first()
    return fn.safety if fn is not None else tool.safety


def approval_message(tool: Tool, function: str) -> str:
    """What a held call answers in place of a result."""
    if approval_policy.approval_warning(tool.safety):
        note = " (DESTRUCTIVE tool)"
    elif approval_policy.approval_warning(_function_safety(tool, function)):
        note = " (DESTRUCTIVE function)"
    else:
        note = ""
    return f"calls to {tool.name}.{function} need a person's approval" + note


def approval_screen(*, tenant: Tenant, actor: Any, tool: Tool, function: str, arguments: Any) -> ApprovalCard:
    """Before a call is held: the tool may refuse it outright, or say what its approval card shows.

    Registered tools answer through their before_approval hook (e.g. "delete 37 orders"); for every other
    tool the card is the call itself.
    """
    from tools_app.services import plugins

    return plugins.before_approval(tenant=tenant, actor=actor, tool=tool, arguments=arguments)


@transaction.atomic
def approval_request(
    *,
    tenant: Tenant,
    actor: Any,
    tool: Tool | int,
    function: str,
    arguments: dict[str, Any],
    agent: Any = None,
    conversation: Any = None,
    via: str = ApprovalVia.INVOKE,
    count: int = 1,
    summary: str = "",
    title: str = "",
) -> Approval:
    """Hold a call for a person: an audit row awaiting approval plus a pending Approval.

    The caller has already checked that the call is allowed and needs approval. `count` is the size of
    a batch of identical calls (chat) that one decision covers. For direct invoke and the gateway the
    approval keeps the arguments (encrypted) so that approving it runs the call; a chat's run keeps its own.
    A direct invoke (API or the admin's Try) identical to one of the requester's still-pending ones (same
    tool, function, via and canonical arguments) joins it: the same approval answers, its count grows, and approving runs it once.
    """

    if not isinstance(tool, Tool):
        tool = selectors.tool_get(tenant=tenant, tool_id=tool)
    if via in (ApprovalVia.INVOKE, ApprovalVia.ADMIN):
        same = _pending_identical(tenant=tenant, actor=actor, tool=tool, function=function, arguments=arguments,
                                  via=via)
        if same is not None:
            same.count += 1
            same.save(update_fields=["count"])
            return same
    secrets = secret_values(tool.type, tool.config)
    held = ToolResult.fail(codes.APPROVAL_REQUIRED, scrub_text(approval_message(tool, function), secrets))
    call = audit(tenant=tenant, actor=actor, tool=tool, function=function, arguments=arguments, result=held,
                 status=CallStatus.AWAITING_APPROVAL, secrets=secrets, agent=agent, conversation=conversation,
                 via=via, title=title)
    return Approval.objects.create(
        tenant=tenant,
        tool_call=call,
        requested_by=actor,
        config_version=tool.config_version,
        arguments_digest=arguments_digest(arguments),
        via=ApprovalVia(via),
        count=max(1, int(count)),
        warning=approval_policy.approval_warning(_function_safety(tool, function)) or "",
        summary=scrub_text(summary or "", secrets)[:500],
        held_arguments=None if via == ApprovalVia.CHAT else dict(arguments),
        expires_at=timezone.now() + timedelta(seconds=settings.TOOLHUB_APPROVAL_TTL_S),
    )


def arguments_digest(arguments: Any) -> str:
    """sha256 of the canonical arguments: what an approval binds (the arguments themselves may be encrypted)."""
    return hashlib.sha256(canonical_json(arguments).encode()).hexdigest()


def _pending_identical(*, tenant: Tenant, actor: Any, tool: Tool, function: str,
                       arguments: dict[str, Any], via: str) -> Approval | None:
    wanted = canonical_json(arguments)
    rows = (Approval.objects.select_for_update(of=("self",)).select_related("tool_call")
            .filter(tenant=tenant, requested_by_id=getattr(actor, "pk", None), via=via,
                    status=ApprovalStatus.PENDING, expires_at__gt=timezone.now(), tool_call__tool=tool,
                    tool_call__function=function, config_version=tool.config_version)
            .order_by("id"))
    for approval in rows:  # arguments are encrypted at rest: compared here, among the requester's few
        if approval.held_arguments is not None and canonical_json(approval.held_arguments) == wanted:
            return approval
    return None


def expire_one(approval: Approval, *, reason: ExpiryReason, now: Any, message: str = "") -> None:
    approval.status, approval.decided_at, approval.held_arguments = ApprovalStatus.EXPIRED, now, None
    approval.expired_reason, approval.expired_message = reason, (message or reason.label)[:500]
    approval.save(update_fields=["status", "decided_at", "held_arguments", "expired_reason", "expired_message"])
    call = approval.tool_call
    call.status, call.error = CallStatus.DENIED, f"not executed: the approval expired: {approval.expired_message}"
    call.save(update_fields=["status", "error"])
