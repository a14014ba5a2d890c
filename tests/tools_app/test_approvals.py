"""Approvals of direct invokes and who may see and decide them, through the real API."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from tenants_app.models import Role
from tools_app.models import Approval, ApprovalStatus, CallStatus, Tool, ToolCall, ToolStatus, ToolType
from tools_app.runtime.approval_policy import DESTRUCTIVE_WARNING
from tools_app.services.approvals import approval_decide, approval_request
from tools_app.wiring.workspaces import workspace_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.OWNER)


@pytest.fixture
def member(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.MEMBER)


@pytest.fixture
def delete_file(tenant: Any) -> Tool:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="delete_file")
    Tool.objects.filter(pk=tool.pk).update(status=ToolStatus.ENABLED)
    return tool


def workspace_file(tenant: Any, name: str = "a.txt") -> Path:
    path = Path(workspace_for(tenant)) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    return path


def invoke(client: Any, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": tool.name, "arguments": arguments},
                       format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def pending_ids(client: Any) -> list[int]:
    resp = client.get("/api/v1/approvals/?status=pending")
    assert resp.status_code == 200, resp.content
    return [a["approval_id"] for a in resp.json()["results"]]


def test_direct_invoke_is_held_then_approving_runs_it(tenant: Any, member: Any, delete_file: Tool) -> None:
    target = workspace_file(tenant)
    held = invoke(member, delete_file, {"path": "a.txt"})
    assert held["success"] is False and held["error_code"] == "APPROVAL_REQUIRED"
    assert held["warning"] == DESTRUCTIVE_WARNING
    approval = Approval.objects.get(pk=held["approval_id"])
    assert approval.status == ApprovalStatus.PENDING and approval.via == "invoke" and approval.count == 1
    assert ToolCall.objects.get(pk=held["call_id"]).status == CallStatus.AWAITING_APPROVAL
    assert target.exists()
    assert pending_ids(member) == [approval.pk]
    listed = member.get("/api/v1/approvals/?status=pending").json()["results"][0]
    assert listed["warning"] == DESTRUCTIVE_WARNING and listed["safety"] == "DESTRUCTIVE" and listed["count"] == 1

    done = member.post(f"/api/v1/approvals/{approval.pk}/approve/")
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["status"] == "approved" and body["success"] is True and body["error_code"] is None
    assert not target.exists()
    ran = ToolCall.objects.get(pk=body["call_id"])
    assert ran.status == CallStatus.OK and ran.actor_id == member.user.pk and ran.function == "delete_file"
    approval.refresh_from_db()
    assert approval.decided_by_id == member.user.pk and approval.held_arguments is None
    assert pending_ids(member) == []
    again = member.post(f"/api/v1/approvals/{approval.pk}/approve/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "approval_already_decided"


def test_deny_closes_it_and_nothing_runs(tenant: Any, member: Any, delete_file: Tool) -> None:
    target = workspace_file(tenant)
    held = invoke(member, delete_file, {"path": "a.txt"})
    denied = member.post(f"/api/v1/approvals/{held['approval_id']}/deny/")
    assert denied.status_code == 200 and denied.json()["status"] == "denied" and "success" not in denied.json()
    assert target.exists()
    assert ToolCall.objects.get(pk=held["call_id"]).status == CallStatus.DENIED
    assert member.post(f"/api/v1/approvals/{held['approval_id']}/approve/").status_code == 409
    assert target.exists()


def test_someone_elses_approval_is_missing_to_a_member(tenant: Any, member: Any, member_client: Any,
                                                        other_api: Any, delete_file: Tool) -> None:
    target = workspace_file(tenant)
    held = invoke(member, delete_file, {"path": "a.txt"})
    other = member_client(tenant, Role.MEMBER)
    missing = other.post("/api/v1/approvals/999999/approve/")
    assert missing.status_code == 404
    for client in (other, other_api):
        for verb in ("approve", "deny"):
            resp = client.post(f"/api/v1/approvals/{held['approval_id']}/{verb}/")
            assert resp.status_code == 404 and resp.json() == missing.json()
        assert client.get(f"/api/v1/approvals/{held['approval_id']}/").json() == missing.json()
        assert pending_ids(client) == []
    assert target.exists()
    assert Approval.objects.get(pk=held["approval_id"]).status == ApprovalStatus.PENDING


def test_admins_decide_only_when_the_tenant_allows(tenant: Any, member: Any, api: Any, delete_file: Tool) -> None:
    target = workspace_file(tenant)
    held = invoke(member, delete_file, {"path": "a.txt"})
    assert pending_ids(api) == []  # an admin sees it, but may not decide: not in "what you may decide"
    assert api.get(f"/api/v1/approvals/{held['approval_id']}/").json()["status"] == "pending"
    refused = api.post(f"/api/v1/approvals/{held['approval_id']}/approve/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert target.exists()
    tenant.admins_can_approve = True
    tenant.save()
    assert pending_ids(api) == [held["approval_id"]]
    done = api.post(f"/api/v1/approvals/{held['approval_id']}/approve/").json()
    assert done["success"] is True and done["decided_by"] == api.user.username
    assert ToolCall.objects.get(pk=done["call_id"]).actor_id == member.user.pk  # runs as the requester
    assert not target.exists()


def test_second_person_rule(tenant: Any, owner: Any, api: Any, member: Any, delete_file: Tool) -> None:
    target = workspace_file(tenant)
    tenant.approval_second_person = True
    tenant.save()
    held = invoke(owner, delete_file, {"path": "a.txt"})
    assert pending_ids(owner) == []
    own = owner.post(f"/api/v1/approvals/{held['approval_id']}/approve/")
    assert own.status_code == 403 and own.json()["error"]["code"] == "permission_denied"
    assert own.json()["error"]["details"] == {"required": "another_admin"}
    assert member.post(f"/api/v1/approvals/{held['approval_id']}/approve/").status_code == 404
    assert target.exists()
    assert pending_ids(api) == [held["approval_id"]]  # admins_can_approve is off: the rule still lets admins
    done = api.post(f"/api/v1/approvals/{held['approval_id']}/approve/").json()
    assert done["success"] is True and not target.exists()


def test_expired_direct_approval_is_409_and_never_runs(tenant: Any, member: Any, delete_file: Tool) -> None:
    target = workspace_file(tenant)
    held = invoke(member, delete_file, {"path": "a.txt"})
    Approval.objects.filter(pk=held["approval_id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert pending_ids(member) == []
    resp = member.post(f"/api/v1/approvals/{held['approval_id']}/approve/")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "approval_expired"
    approval = Approval.objects.get(pk=held["approval_id"])
    assert approval.status == ApprovalStatus.EXPIRED and approval.held_arguments is None
    assert ToolCall.objects.get(pk=held["call_id"]).status == CallStatus.DENIED
    assert target.exists()


def test_approved_call_is_checked_again_when_it_runs(tenant: Any, member: Any, delete_file: Tool) -> None:
    target = workspace_file(tenant)
    held = invoke(member, delete_file, {"path": "a.txt"})
    Tool.objects.filter(pk=delete_file.pk).update(status=ToolStatus.DISABLED)
    body = member.post(f"/api/v1/approvals/{held['approval_id']}/approve/").json()
    assert body["status"] == "approved" and body["success"] is False and body["error_code"] == "DISABLED"
    assert target.exists()


def test_viewer_cannot_invoke_or_list(tenant: Any, member_client: Any, delete_file: Tool) -> None:
    viewer = member_client(tenant, Role.VIEWER)
    resp = viewer.post(f"/api/v1/tools/{delete_file.pk}/invoke/", {"function": "delete_file", "arguments": {}},
                       format="json")
    assert resp.status_code == 403
    assert viewer.get("/api/v1/approvals/").status_code == 403
    assert not Approval.objects.exists()


def test_service_request_and_decide_for_the_gateway(tenant: Any, member: Any, delete_file: Tool) -> None:
    """The entry points the MCP gateway uses: request with `via="gateway"`, decide runs the call."""
    target = workspace_file(tenant)
    approval = approval_request(tenant=tenant, actor=member.user, tool=delete_file, function="delete_file",
                                arguments={"path": "a.txt"}, via="gateway")
    assert approval.via == "gateway" and approval.warning == DESTRUCTIVE_WARNING
    decision = approval_decide(tenant=tenant, actor=member.user, approval_id=approval.pk, approve=True)
    assert decision.approval.status == ApprovalStatus.APPROVED
    assert decision.invocation is not None and decision.invocation.result.success
    assert not target.exists()


def test_identical_invokes_join_one_approval_and_run_once(tenant: Any, member: Any, delete_file: Tool) -> None:
    workspace_file(tenant, "a.txt")
    workspace_file(tenant, "b.txt")
    first = invoke(member, delete_file, {"path": "a.txt"})
    again = invoke(member, delete_file, {"path": "a.txt"})
    other = invoke(member, delete_file, {"path": "b.txt"})
    assert again["approval_id"] == first["approval_id"] and again["call_id"] == first["call_id"]
    assert other["approval_id"] != first["approval_id"]
    listed = {a["approval_id"]: a["count"] for a in member.get("/api/v1/approvals/?status=pending").json()["results"]}
    assert listed == {first["approval_id"]: 2, other["approval_id"]: 1}
    done = member.post(f"/api/v1/approvals/{first['approval_id']}/approve/").json()
    assert done["success"] is True and done["count"] == 2
    assert ToolCall.objects.filter(function="delete_file", status=CallStatus.OK).count() == 1
    # Once decided, the same call asks afresh.
    assert invoke(member, delete_file, {"path": "a.txt"})["approval_id"] not in (first["approval_id"],
                                                                                 other["approval_id"])


def test_beat_closes_due_approvals(tenant: Any, member: Any, delete_file: Tool) -> None:
    from tools_app.tasks import expire_approvals

    due = invoke(member, delete_file, {"path": "a.txt"})
    fresh = invoke(member, delete_file, {"path": "b.txt"})
    Approval.objects.filter(pk=due["approval_id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_approvals() == 1
    assert Approval.objects.get(pk=due["approval_id"]).status == ApprovalStatus.EXPIRED
    assert ToolCall.objects.get(pk=due["call_id"]).status == CallStatus.DENIED
    assert Approval.objects.get(pk=fresh["approval_id"]).status == ApprovalStatus.PENDING
    assert expire_approvals() == 0
