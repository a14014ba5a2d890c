"""Approve or deny a held tool call: only the member who asked, or a tenant admin when the tenant allows it."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents_app import selectors
from agents_app.errors import ApprovalDecided, ApprovalExpired, NotApprover
from tenants_app.models import Tenant
from tools_app.models import Approval, ApprovalStatus, CallStatus

DECISIONS = {"approve": ApprovalStatus.APPROVED, "deny": ApprovalStatus.DENIED}


def approval_decide(*, tenant: Tenant, actor: Any, approval_id: Any, decision: str) -> Approval:
    """Record a decision; an expired request is marked expired and refused (409)."""
    approval, expired = _decide(tenant=tenant, actor=actor, approval_id=approval_id, decision=decision)
    if expired:
        raise ApprovalExpired(
            "this approval request expired; send the request again",
            details={"approval_id": approval.pk, "expired_at": approval.expires_at.isoformat()},
        )
    return approval


@transaction.atomic
def _decide(*, tenant: Tenant, actor: Any, approval_id: Any, decision: str) -> tuple[Approval, bool]:
    status = DECISIONS[decision]
    approval = selectors.approval_get(tenant=tenant, approval_id=approval_id, for_update=True)
    asker = approval.requested_by_id == getattr(actor, "pk", None)
    if not asker and not (tenant.admins_can_approve and selectors.is_admin(tenant=tenant, user=actor)):
        raise NotApprover("only the member who made the request may decide it"
                          + ("" if tenant.admins_can_approve else " (this tenant does not let admins decide)"))
    if approval.status == ApprovalStatus.EXPIRED:
        return approval, True
    if approval.status != ApprovalStatus.PENDING:
        raise ApprovalDecided(f"this approval was already {approval.status}", details={"status": approval.status})
    now = timezone.now()
    call = approval.tool_call
    if approval.expires_at <= now:
        approval.status, approval.decided_at = ApprovalStatus.EXPIRED, now
        approval.save(update_fields=["status", "decided_at"])
        call.status, call.error = CallStatus.DENIED, "not executed: the approval expired"
        call.save(update_fields=["status", "error"])
        return approval, True
    approval.status, approval.decided_by, approval.decided_at = status, actor, now
    approval.save(update_fields=["status", "decided_by", "decided_at"])
    if status == ApprovalStatus.DENIED:
        call.status, call.error = CallStatus.DENIED, "denied by a person"
        call.save(update_fields=["status", "error"])
    return approval, False
