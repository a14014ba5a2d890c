"""The approvals queue in the admin: lists the current tenant's pending requests, decides through the service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.factories import MembershipFactory, UserFactory
from tests.tenants_app.test_admin_tenant_context import admin_client
from tools_app import adapters
from tools_app.models import Approval, ApprovalStatus, Tool, ToolStatus, ToolType

pytestmark = pytest.mark.django_db


def enabled_builtin(tenant: Any, name: str) -> Tool:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name=name)
    Tool.objects.filter(pk=tool.pk).update(status=ToolStatus.ENABLED)
    return tool


def held_delete(client: Any, tool: Tool, path: str, **extra: Any) -> int:
    resp = client.post(f"/api/v1/tools/{tool.pk}/invoke/",
                       {"function": "delete_file", "arguments": {"path": path, **extra}}, format="json")
    assert resp.json()["error_code"] == "APPROVAL_REQUIRED", resp.content
    return int(resp.json()["approval_id"])


@pytest.fixture
def operator(tenant: Any) -> tuple[Any, Client]:
    """A tenant admin with an API token and an admin session: asks for calls and decides them."""
    from rest_framework.test import APIClient

    user = UserFactory(is_staff=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_for_user(user=user)}")
    web = Client()
    web.force_login(user)
    return api, web


def workspace_file(tenant: Any, name: str) -> Path:
    path = Path(adapters.workspace_for(tenant)) / name
    path.write_text("x")
    return path


def test_queue_lists_pending_with_redacted_arguments_and_decides_one(tenant: Any, operator: Any) -> None:
    api, web = operator
    tool = enabled_builtin(tenant, "delete_file")
    target = workspace_file(tenant, "old.log")
    approval_id = held_delete(api, tool, "old.log")
    page = web.get("/admin/tools_app/approval/").content.decode()
    assert f"#{approval_id} delete_file.delete_file" in page and "old.log" in page
    assert "DESTRUCTIVE" in page and "direct call (API)" in page and "minutes left" in page
    resp = web.post(f"/admin/tools_app/approval/{approval_id}/decide/", {"decision": "approve"}, follow=True)
    assert "approved; it ran: OK" in resp.content.decode()
    assert not target.exists()
    assert Approval.objects.get(pk=approval_id).status == ApprovalStatus.APPROVED
    assert f"#{approval_id} delete_file" not in web.get("/admin/tools_app/approval/").content.decode()
    decided = web.get("/admin/tools_app/approval/?status=approved").content.decode()
    assert f"#{approval_id} delete_file" in decided and "Approved</span> by" in decided


def test_secret_looking_arguments_are_masked(tenant: Any, operator: Any) -> None:
    api, web = operator
    tool = enabled_builtin(tenant, "execute_command")
    resp = api.post(f"/api/v1/tools/{tool.pk}/invoke/",
                    {"function": "execute_command", "arguments": {"command": "echo hunter2-password-value"}},
                    format="json")
    approval_id = resp.json().get("approval_id")
    assert approval_id, resp.content
    call = Approval.objects.get(pk=approval_id).tool_call
    call.arguments = {"command": "echo hi", "api_token": "hunter2-token"}
    call.save(update_fields=["arguments"])
    page = web.get("/admin/tools_app/approval/").content.decode()
    assert "hunter2-token" not in page and "********" in page


def test_batch_shows_its_count_before_deciding(tenant: Any, operator: Any) -> None:
    api, web = operator
    tool = enabled_builtin(tenant, "delete_file")
    first = held_delete(api, tool, "a.txt")
    assert held_delete(api, tool, "a.txt") == first  # identical: joins, count 2
    second = held_delete(api, tool, "b.txt")
    data = {"action": "deny_selected", "_selected_action": [first, second]}
    confirm = web.post("/admin/tools_app/approval/", data).content.decode()
    assert "deny</strong> 2 requests" in confirm and "<strong>3</strong> calls" in confirm and "×2" in confirm
    assert Approval.objects.filter(status=ApprovalStatus.PENDING).count() == 2  # nothing decided yet
    web.post("/admin/tools_app/approval/", {**data, "confirmed": "yes"})
    assert set(Approval.objects.values_list("status", flat=True)) == {ApprovalStatus.DENIED}


def test_a_decision_the_policy_refuses_is_a_message(tenant: Any, operator: Any, member_client: Any) -> None:
    api, web = operator
    member = member_client(tenant, Role.MEMBER)
    tool = enabled_builtin(tenant, "delete_file")
    approval_id = held_delete(member, tool, "c.txt")  # the tenant does not let admins decide members' requests
    resp = web.post(f"/admin/tools_app/approval/{approval_id}/decide/", {"decision": "approve"}, follow=True)
    assert "not decided" in resp.content.decode()
    assert Approval.objects.get(pk=approval_id).status == ApprovalStatus.PENDING


def test_another_tenants_approvals_are_invisible(tenant: Any, other_tenant: Any, member_client: Any) -> None:
    foreign = member_client(other_tenant, Role.ADMIN)
    approval_id = held_delete(foreign, enabled_builtin(other_tenant, "delete_file"), "theirs.txt")
    web = admin_client(tenant)
    page = web.get("/admin/tools_app/approval/?status=all").content.decode()
    assert "theirs.txt" not in page
    web.post(f"/admin/tools_app/approval/{approval_id}/decide/", {"decision": "deny"})
    assert Approval.objects.get(pk=approval_id).status == ApprovalStatus.PENDING
    assert web.get(f"/admin/tools_app/approval/{approval_id}/change/", follow=True).redirect_chain
