"""Approvals: deciding held calls (above invoke: approving runs the call), their binding and expiry.

Which calls need a person and holding one is the gate below invoke (tools_app.services.approval_gate); a
server's mid-call questions are tools_app.services.client_request_holds.

Used alike by the chat (agents_app), direct invoke (`POST /tools/{id}/invoke/`) and the MCP gateway.
Who may decide:
- by default, only the member who asked; tenant owners/admins too when the tenant sets `admins_can_approve`;
- with the tenant's `approval_second_person`, only an owner/admin other than the requester (four eyes).
Who may see: the requester and the tenant's owners/admins; to anyone else an approval is missing (404).
What it binds: the tool's config version and the arguments the person reviewed, and the requester's right to
make that call (tools_app.policies.CALLS). If any of them no longer holds when it is approved (or, for a chat,
resumed), it runs nothing: it expires with a typed reason (`Approval.expired_reason`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from tenants_app.models import Tenant
from tools_app import selectors
from tools_app.errors import ApprovalDecided, ApprovalExpired, NotApprover
from tools_app.models import (
    Approval,
    ApprovalStatus,
    ApprovalVia,
    CallStatus,
    ExpiryReason,
    Tool,
)
from tools_app.policies import CALLS, DECIDERS
from tools_app.services.approval_gate import (
    approval_message,
    approval_request,
    approval_screen,
    arguments_digest,
    expire_one,
    needs_approval,
)
from tools_app.services.audit import through_client
from tools_app.services.client_request_holds import (
    CLIENT_REQUEST,
    CLIENT_REQUEST_KINDS,
    check_answer,
    client_request_hold,
    client_request_of,
    client_request_wait,
)
from tools_app.services.invoke import Invocation, tool_invoke

# The gate's and the holds' names, importable from here as before (new code imports them from their homes).
__all__ = [
    "CLIENT_REQUEST",
    "CLIENT_REQUEST_KINDS",
    "ApprovalDecision",
    "approval_decide",
    "approval_expire_unbound",
    "approval_message",
    "approval_record_result",
    "approval_request",
    "approval_screen",
    "approval_unbound",
    "approvals_expire",
    "approvals_expire_due",
    "arguments_digest",
    "client_request_hold",
    "client_request_of",
    "client_request_wait",
    "may_decide",
    "needs_approval",
]


@dataclass
class ApprovalDecision:
    """A recorded decision; `invocation` is the call's outcome when approving ran it (invoke, gateway)."""

    approval: Approval
    invocation: Invocation | None = None

    def body(self) -> dict[str, Any]:
        return self.invocation.body() if self.invocation is not None else {}


def may_decide(*, tenant: Tenant, actor: Any, approval: Approval) -> tuple[bool, str]:
    """(allowed, why not) under the tenant's policy: the why_not side of tools_app.policies.DECIDERS."""
    why = DECIDERS.why_not(tenant=tenant, user=actor, approval=approval)
    return why is None, why or ""


def approval_decide(*, tenant: Tenant, actor: Any, approval_id: Any, approve: bool,
                    answer: Any = None) -> ApprovalDecision:
    """Approve or deny a pending request; approving a direct-invoke or gateway request runs the call.

    A server's question held during a chat (elicitation) is approved with the user's `answer` (checked
    against the question's schema), which goes back to the waiting call; denying declines it.

    An approval the actor may not see is NotFound (exactly like a missing one); one they may see but
    not decide is NotApprover (403); an expired one is marked expired and refused (409); a decided one
    is refused (409), so two concurrent approvals run the call once.
    """
    approval, expired = _decide(tenant=tenant, actor=actor, approval_id=approval_id, approve=approve, answer=answer)
    if expired:
        reason = approval.expired_reason or ExpiryReason.TIMED_OUT
        said = approval.expired_message or ExpiryReason(reason).label
        raise ApprovalExpired(
            f"this approval request expired ({said}); send the request again",
            details={"approval_id": approval.pk, "expired_at": approval.expires_at.isoformat(), "reason": reason,
                     "reason_message": said},
        )
    decision = ApprovalDecision(approval)
    if approve and approval.via != ApprovalVia.CHAT:
        decision.invocation = _run_held(tenant=tenant, approval=approval)
        approval_record_result(tenant=tenant, approval_id=approval.pk, call=decision.invocation.call)
    return decision


@transaction.atomic
def _decide(*, tenant: Tenant, actor: Any, approval_id: Any, approve: bool, answer: Any = None) -> tuple[Approval, bool]:
    approval = selectors.approval_get_visible(tenant=tenant, user=actor, approval_id=approval_id, for_update=True)
    denied = DECIDERS.denial(tenant=tenant, user=actor, approval=approval)
    if denied is not None:
        raise NotApprover(denied[1], details={"required": denied[0]})
    if approval.status == ApprovalStatus.EXPIRED:
        return approval, True
    if approval.status != ApprovalStatus.PENDING:
        raise ApprovalDecided(f"this approval was already {approval.status}", details={"status": approval.status})
    now = timezone.now()
    if approval.expires_at <= now:
        expire_one(approval, reason=ExpiryReason.TIMED_OUT, now=now)
        return approval, True
    kind = client_request_of(approval)
    if approve and not kind:
        unbound = approval_unbound(tenant=tenant, approval=approval)
        if unbound is not None:
            expire_one(approval, reason=unbound[0], message=unbound[1], now=now)
            return approval, True
    checked = check_answer(approval, kind, approve, answer)
    approval.status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
    approval.decided_by, approval.decided_at = actor, now
    held = approval.held_arguments
    # A server's question keeps the answer for the waiting call (client_request_wait clears it).
    approval.held_arguments = {**held, "answer": checked} if kind and isinstance(held, dict) else None
    approval.save(update_fields=["status", "decided_by", "decided_at", "held_arguments"])
    approval.held_arguments = held  # kept in memory for the run that follows the commit
    if not approve:
        call = approval.tool_call
        call.status, call.error = CallStatus.DENIED, "denied by a person"
        call.save(update_fields=["status", "error"])
    elif kind:
        call = approval.tool_call
        call.status, call.error_code, call.error = CallStatus.OK, "", ""
        call.result_excerpt = "answered by a person" if kind == "elicitation" else "approved by a person"
        call.save(update_fields=["status", "error_code", "error", "result_excerpt"])
    return approval, False


def approval_record_result(*, tenant: Tenant, approval_id: Any, call: Any) -> None:
    """Remember the audit row of the run an approval let through (a resumed chat runs it after the decision).

    The first run counts (a batch of identical calls runs several); a row without an id (spooled) is skipped.
    """
    if getattr(call, "pk", None) is None:
        return
    Approval.objects.filter(tenant=tenant, pk=approval_id, result_call=None).update(result_call=call)


def _run_held(*, tenant: Tenant, approval: Approval) -> Invocation:
    """Run an approved call as the member who asked (their access is checked again), outside any transaction."""
    call = approval.tool_call
    with through_client(call.client):  # the run names the client the held call came through, as the held row does
        return tool_invoke(
            tenant=tenant,
            actor=approval.requested_by,
            tool_id=call.tool_id,
            function=call.function,
            arguments=approval.held_arguments or {},
            approved=True,
            agent=call.agent,
            via=approval.via,
        )


# A refusal of the requester's right to the call (tools_app.policies.CALLS) as the approval's expiry reason.
_RIGHTS_EXPIRY = {
    "not_a_member": ExpiryReason.REQUESTER_REMOVED,
    "role_too_low": ExpiryReason.REQUESTER_ROLE,
    "tool_not_usable": ExpiryReason.TOOL_NOT_USABLE,
    "agent_not_usable": ExpiryReason.AGENT_NOT_USABLE,
    "function_not_allowed": ExpiryReason.FUNCTION_NOT_ALLOWED,
}


def approval_unbound(*, tenant: Tenant, approval: Approval,
                     arguments: Any = None) -> tuple[ExpiryReason, str] | None:
    """Why the approval no longer covers the call it holds, as (reason, message); None while it does.

    It covers the tool as configured when it was asked (its config version), the arguments the person
    reviewed (`arguments`, default the held ones; a chat passes its transcript's), and a requester who may
    still make the call: a member or more, with use_tool, and through an agent, with use_agent and a link
    that still allows the function. A disabled or paused tool is not a reason: the run reports it.
    """
    call = approval.tool_call
    tool = Tool.objects.filter(tenant=tenant, pk=call.tool_id).first() if call.tool_id else None
    if tool is None:
        return ExpiryReason.TOOL_REMOVED, "the tool was deleted after the request"
    if approval.config_version is not None and tool.config_version != approval.config_version:
        return ExpiryReason.CONFIG_CHANGED, (
            f"the tool's configuration changed after the request (version {approval.config_version}, now "
            f"{tool.config_version}): what was reviewed is not what would run")
    shown = approval.held_arguments if arguments is None else arguments
    if approval.arguments_digest and shown is not None and arguments_digest(shown) != approval.arguments_digest:
        return ExpiryReason.ARGUMENTS_CHANGED, "the arguments to run differ from the ones the person reviewed"
    refusal = CALLS.why_not_rights(tenant=tenant, user=approval.requested_by, tool=tool, function=call.function,
                                   agent=call.agent)
    if refusal is not None:
        return _RIGHTS_EXPIRY[refusal.reason], f"the requester lost the right to this call: {refusal.message}"
    return None


@transaction.atomic
def approval_expire_unbound(*, tenant: Tenant, approval: Approval, arguments: Any = None) -> str | None:
    """For a decided chat approval about to run at resume: expire it if it no longer binds (approval_unbound);
    the message when it did, else None."""
    unbound = approval_unbound(tenant=tenant, approval=approval, arguments=arguments)
    if unbound is None:
        return None
    expire_one(approval, reason=unbound[0], message=unbound[1], now=timezone.now())
    return approval.expired_message


def approvals_expire_due() -> int:
    """Beat: close every tenant's pending approvals past their expiry (the held calls are marked not run)."""
    tenant_ids = set(Approval.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=timezone.now())
                     .values_list("tenant_id", flat=True))
    return sum(approvals_expire(tenant=tenant, due_only=True) for tenant in Tenant.objects.filter(pk__in=tenant_ids))


@transaction.atomic
def approvals_expire(*, tenant: Tenant, approvals: Iterable[Approval] | None = None,
                     reason: ExpiryReason = ExpiryReason.TIMED_OUT, due_only: bool = False) -> int:
    """Close pending approvals without running anything: the given ones (a chat that moved on), or with
    `due_only` those past their expiry. Returns how many were closed."""
    now = timezone.now()
    if approvals is None:
        rows = list(Approval.objects.filter(tenant=tenant, status=ApprovalStatus.PENDING, expires_at__lte=now)
                    .select_related("tool_call").select_for_update(of=("self",)))
    else:
        rows = [a for a in approvals if a.tenant_id == tenant.pk]
    closed = 0
    for approval in rows:
        if approval.status != ApprovalStatus.PENDING or (due_only and approval.expires_at > now):
            continue
        expire_one(approval, reason=reason, now=now)
        closed += 1
    return closed
