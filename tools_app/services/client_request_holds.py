"""A server's own requests during an agent's call (MCP sampling and elicitation), held for the chat's user as
approvals: the same rule says who decides and the same API decides; an elicitation's answer comes with it."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from tenants_app.models import Tenant
from tools_app import selectors
from tools_app.configs import secret_values
from tools_app.errors import InvalidAnswer
from tools_app.models import Approval, ApprovalStatus, ApprovalVia, CallStatus, ExpiryReason, Tool
from tools_app.runtime import result as codes
from tools_app.runtime.errors import InvalidParams
from tools_app.runtime.result import ToolResult
from tools_app.runtime.schemas import validate_arguments
from tools_app.services.approval_gate import expire_one
from tools_app.services.audit import audit

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
            expire_one(approval, reason=ExpiryReason.NOT_ANSWERED, now=timezone.now())
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


def check_answer(approval: Approval, kind: str | None, approve: bool, answer: Any) -> dict[str, Any] | None:
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
