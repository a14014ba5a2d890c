"""Approvals: the one place that decides which calls need a person, records requests, decisions and expiry.

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

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.secrets import scrub_text
from tenants_app.models import Tenant
from tools_app import selectors
from tools_app.configs import secret_values
from tools_app.errors import ApprovalDecided, ApprovalExpired, InvalidAnswer, NotApprover
from tools_app.models import (
    Approval,
    ApprovalStatus,
    ApprovalVia,
    CallStatus,
    ExpiryReason,
    Tool,
    ToolFunction,
)
from tools_app.policies import CALLS, DECIDERS
from tools_app.runtime import approval_policy
from tools_app.runtime import result as codes
from tools_app.runtime.errors import InvalidParams
from tools_app.runtime.plugin import ApprovalCard
from tools_app.runtime.result import ToolResult
from tools_app.runtime.schemas import canonical_json, validate_arguments
from tools_app.services.audit import audit, through_client

if TYPE_CHECKING:
    from tools_app.services.invoke import Invocation


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


# --- a server's own requests during a call (MCP sampling and elicitation) ----------------------------------

# Key of `held_arguments` that marks an approval as a server's mid-call request, not a held call.
CLIENT_REQUEST = "client_request"
CLIENT_REQUEST_KINDS = {"sampling": "a completion from the agent's model (MCP sampling)",
                        "elicitation": "an answer from you (MCP elicitation)"}
CLIENT_REQUEST_POLL_S = 0.2


@transaction.atomic
def client_request_hold(*, tenant: Tenant, actor: Any, tool: Tool | int, function: str, kind: str,
                        question: dict[str, Any], agent: Any = None, conversation: Any = None,
                        wait_s: float) -> Approval:
    """Hold a server's sampling or elicitation request, made during an agent's call, for the chat's user.

    It is an approval like any other (an audit row awaiting approval plus a pending Approval via the chat),
    so the same rule says who decides (`may_decide`) and the same API decides; the question is kept
    (encrypted) with it, and an elicitation's answer comes with the approval. It expires when the call
    can no longer use the answer (`wait_s`).
    """

    if not isinstance(tool, Tool):
        tool = selectors.tool_get(tenant=tenant, tool_id=tool)
    secrets = secret_values(tool.type, tool.config)
    asks = CLIENT_REQUEST_KINDS[kind]
    held = ToolResult.fail(codes.APPROVAL_REQUIRED, f"{tool.name}.{function} asks for {asks}")
    call = audit(tenant=tenant, actor=actor, tool=tool, function=function, arguments={"request": kind}, result=held,
                 status=CallStatus.AWAITING_APPROVAL, secrets=secrets, agent=agent, conversation=conversation,
                 via=ApprovalVia.CHAT)
    return Approval.objects.create(
        tenant=tenant, tool_call=call, requested_by=actor, via=ApprovalVia.CHAT, count=1, warning="",
        held_arguments={CLIENT_REQUEST: kind, "question": question},
        expires_at=timezone.now() + timedelta(seconds=max(1.0, wait_s)),
    )


def client_request_wait(*, tenant: Tenant, approval_id: int, wait_s: float) -> tuple[str, dict[str, Any] | None]:
    """Block until the held request is decided or `wait_s` passes (then it expires); (status, answer).

    Polls the database, so a decision made through any web process counts.
    """
    deadline = time.monotonic() + wait_s
    while True:
        status = Approval.objects.filter(pk=approval_id, tenant=tenant).values_list("status", flat=True).first()
        if status != ApprovalStatus.PENDING or time.monotonic() >= deadline:
            break
        time.sleep(CLIENT_REQUEST_POLL_S)
    with transaction.atomic():
        approval = Approval.objects.select_for_update(of=("self",)).select_related("tool_call").get(pk=approval_id)
        if approval.status == ApprovalStatus.PENDING:
            _expire_one(approval, reason=ExpiryReason.NOT_ANSWERED, now=timezone.now())
            return ApprovalStatus.EXPIRED, None
        held = approval.held_arguments if isinstance(approval.held_arguments, dict) else {}
        if approval.held_arguments is not None:
            approval.held_arguments = None
            approval.save(update_fields=["held_arguments"])
        return approval.status, held.get("answer")


def client_request_of(approval: Approval) -> str | None:
    """"sampling"/"elicitation" when the approval holds a server's mid-call request, else None."""
    held = approval.held_arguments
    kind = held.get(CLIENT_REQUEST) if isinstance(held, dict) else None
    return kind if kind in CLIENT_REQUEST_KINDS else None


def _check_answer(approval: Approval, kind: str | None, approve: bool, answer: Any) -> dict[str, Any] | None:
    if answer is None and not (kind == "elicitation" and approve):
        return None
    if kind != "elicitation":
        raise InvalidAnswer("only a server's question (an elicitation) takes an answer; this approval has none")
    if not approve:
        raise InvalidAnswer("a denied question takes no answer")
    question = (approval.held_arguments or {}).get("question") or {}
    if answer is None:
        if question.get("mode", "form") != "form":
            return {}  # a URL question is accepted without fields
        answer = {}  # approving without an answer sends no fields: fine only if the server requires none
    if not isinstance(answer, dict):
        raise InvalidAnswer("answer must be a JSON object of the fields the server asked for")
    schema = question.get("requestedSchema")
    if isinstance(schema, dict):
        try:
            validate_arguments(schema, answer)
        except InvalidParams as exc:
            raise InvalidAnswer(f"the answer does not fit the server's question: {exc.message}",
                                details=exc.details) from None
    return answer


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
        _expire_one(approval, reason=ExpiryReason.TIMED_OUT, now=now)
        return approval, True
    kind = client_request_of(approval)
    if approve and not kind:
        unbound = approval_unbound(tenant=tenant, approval=approval)
        if unbound is not None:
            _expire_one(approval, reason=unbound[0], message=unbound[1], now=now)
            return approval, True
    checked = _check_answer(approval, kind, approve, answer)
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
    from tools_app.services.invoke import tool_invoke

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


def _expire_one(approval: Approval, *, reason: ExpiryReason, now: Any, message: str = "") -> None:
    approval.status, approval.decided_at, approval.held_arguments = ApprovalStatus.EXPIRED, now, None
    approval.expired_reason, approval.expired_message = reason, (message or reason.label)[:500]
    approval.save(update_fields=["status", "decided_at", "held_arguments", "expired_reason", "expired_message"])
    call = approval.tool_call
    call.status, call.error = CallStatus.DENIED, f"not executed: the approval expired: {approval.expired_message}"
    call.save(update_fields=["status", "error"])


@transaction.atomic
def approval_expire_unbound(*, tenant: Tenant, approval: Approval, arguments: Any = None) -> str | None:
    """For a decided chat approval about to run at resume: expire it if it no longer binds (approval_unbound);
    the message when it did, else None."""
    unbound = approval_unbound(tenant=tenant, approval=approval, arguments=arguments)
    if unbound is None:
        return None
    _expire_one(approval, reason=unbound[0], message=unbound[1], now=timezone.now())
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
        _expire_one(approval, reason=reason, now=now)
        closed += 1
    return closed
