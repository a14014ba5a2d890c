"""An approval binds what the person reviewed: the tool's config version, the arguments, and the requester's
right to make that call. When any of them no longer holds, approving runs nothing: the approval expires with
a typed reason, shown by the decide answer, the approval's detail and the admin queue. A trial run (dry_run)
of a function that needs approval does not hand out the data the approval gates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from guardian.shortcuts import assign_perm

from agents_app.models import Agent
from tenants_app import services as tenant_services
from tenants_app.models import Membership, Role
from tests.factories import MembershipFactory, UserFactory
from tests.fixtures import echo_http
from tools_app.errors import ApprovalExpired
from tools_app.models import Approval, ApprovalStatus, CallStatus, Tool, ToolCall, ToolStatus, ToolType
from tools_app.services.approvals import approval_decide, approval_request
from tools_app.wiring.workspaces import workspace_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.MEMBER)


@pytest.fixture
def owner(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.OWNER)


@pytest.fixture
def delete_file(tenant: Any) -> Tool:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="delete_file")
    Tool.objects.filter(pk=tool.pk).update(status=ToolStatus.ENABLED)
    return tool


@pytest.fixture
def echo_server() -> Iterator[str]:
    with echo_http.echo_server() as url:
        yield url


def workspace_file(tenant: Any, name: str = "a.txt") -> Path:
    path = Path(workspace_for(tenant)) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    return path


def held_delete(client: Any, tool: Tool) -> int:
    resp = client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "delete_file", "arguments": {"path": "a.txt"}},
                       format="json")
    assert resp.status_code == 200 and resp.json()["error_code"] == "APPROVAL_REQUIRED", resp.content
    return int(resp.json()["approval_id"])


def expired_with(client: Any, approval_id: int, reason: str) -> dict[str, Any]:
    """Approving answers 409 approval_expired naming `reason`; the detail and the row say the same."""
    resp = client.post(f"/api/v1/approvals/{approval_id}/approve/")
    assert resp.status_code == 409, resp.content
    error = resp.json()["error"]
    assert error["code"] == "approval_expired" and error["details"]["reason"] == reason, error
    approval = Approval.objects.get(pk=approval_id)
    assert approval.status == ApprovalStatus.EXPIRED and approval.expired_reason == reason
    assert approval.held_arguments is None and approval.tool_call.status == CallStatus.DENIED
    return dict(error)


def shown(client: Any, approval_id: int) -> dict[str, Any]:
    resp = client.get(f"/api/v1/approvals/{approval_id}/")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


# --- the tool's configuration -----------------------------------------------------------------------------


def test_a_config_change_after_the_request_expires_the_approval(tenant: Any, owner: Any, member: Any,
                                                                   echo_server: str) -> None:
    created = owner.post("/api/v1/tools/", {"name": "lookup", "type": "HTTP", "requires_approval": True, "config": {
        "method": "GET", "url": echo_server + "/reviewed/${input.q}",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
        format="json")
    assert created.status_code == 201, created.content
    tool_id = created.json()["id"]
    held = member.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "call", "arguments": {"q": "x"}},
                       format="json").json()
    assert held["error_code"] == "APPROVAL_REQUIRED", held
    approval = Approval.objects.get(pk=held["approval_id"])
    version = Tool.objects.get(pk=tool_id).config_version
    changed = owner.patch(f"/api/v1/tools/{tool_id}/", {"config": {
        "method": "GET", "url": echo_server + "/changed/${input.q}",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
        format="json")
    assert changed.status_code == 200, changed.content

    expired_with(member, approval.pk, "config_changed")  # asserts approval_expired and its reason
    assert not ToolCall.objects.filter(tool_id=tool_id, status=CallStatus.OK).exists()  # nothing ran
    detail = shown(member, approval.pk)
    assert detail["status"] == "expired" and detail["expired_reason"] == "config_changed"
    assert "configuration changed" in detail["expired_message"]
    assert Approval.objects.get(pk=approval.pk).config_version == version


def test_an_unchanged_config_still_runs_once_approved(tenant: Any, owner: Any, member: Any, echo_server: str) -> None:
    tool_id = owner.post("/api/v1/tools/", {"name": "lookup", "type": "HTTP", "requires_approval": True, "config": {
        "method": "GET", "url": echo_server + "/reviewed"}}, format="json").json()["id"]
    held = member.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "call", "arguments": {}},
                       format="json").json()
    owner.patch(f"/api/v1/tools/{tool_id}/", {"description": "only the words changed"}, format="json")
    done = member.post(f"/api/v1/approvals/{held['approval_id']}/approve/").json()
    assert done["status"] == "approved" and done["success"] is True, done
    assert done["data"]["path"] == "/reviewed" and done["expired_reason"] is None


# --- the requester's right to make the call -----------------------------------------------------------------


def test_a_requester_demoted_to_viewer_gets_nothing_run(tenant: Any, owner: Any, api: Any, member: Any,
                                                         delete_file: Tool) -> None:
    tenant.admins_can_approve = True
    tenant.save()
    target = workspace_file(tenant)
    approval_id = held_delete(member, delete_file)
    membership = Membership.objects.get(tenant=tenant, user=member.user)
    tenant_services.membership_set_role(tenant=tenant, actor=owner.user, membership_id=membership.pk,
                                        role=Role.VIEWER)
    error = expired_with(api, approval_id, "requester_role")
    assert "viewer" in error["message"]
    assert target.exists()
    assert shown(api, approval_id)["expired_reason"] == "requester_role"


def test_a_requester_removed_from_the_tenant_gets_nothing_run(tenant: Any, owner: Any, api: Any, member: Any,
                                                               delete_file: Tool) -> None:
    tenant.admins_can_approve = True
    tenant.save()
    target = workspace_file(tenant)
    approval_id = held_delete(member, delete_file)
    membership = Membership.objects.get(tenant=tenant, user=member.user)
    tenant_services.membership_remove(tenant=tenant, actor=owner.user, membership_id=membership.pk)
    expired_with(api, approval_id, "requester_removed")
    assert target.exists()


def test_a_requester_who_lost_use_tool_gets_nothing_run(tenant: Any, member: Any, delete_file: Tool) -> None:
    target = workspace_file(tenant)
    approval_id = held_delete(member, delete_file)
    # A grant to someone else restricts the tool to its grantees: the requester may no longer use it.
    assign_perm("tools_app.use_tool", UserFactory(), delete_file)
    expired_with(member, approval_id, "tool_not_usable")  # asserts approval_expired and its reason
    assert target.exists()


def _gateway_request(tenant: Any, api: Any, member: Any, tool: Tool) -> tuple[Approval, Agent]:
    resp = api.post("/api/v1/agents/", {"name": "ops", "model": None, "tools": [{"tool": tool.pk}]}, format="json")
    assert resp.status_code == 201, resp.content
    agent = Agent.objects.get(pk=resp.json()["id"])
    approval = approval_request(tenant=tenant, actor=member.user, tool=tool, function="delete_file",
                                arguments={"path": "a.txt"}, agent=agent, via="gateway")
    return approval, agent


def _expired_by_service(tenant: Any, member: Any, approval: Approval, reason: str) -> None:
    with pytest.raises(ApprovalExpired) as raised:
        approval_decide(tenant=tenant, actor=member.user, approval_id=approval.pk, approve=True)
    assert raised.value.details["reason"] == reason
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.EXPIRED and approval.expired_reason == reason


def test_an_agent_link_that_no_longer_allows_the_function_gets_nothing_run(tenant: Any, api: Any, member: Any,
                                                                           delete_file: Tool) -> None:
    target = workspace_file(tenant)
    approval, agent = _gateway_request(tenant, api, member, delete_file)
    narrowed = api.patch(f"/api/v1/agents/{agent.pk}/", {"tools": [{"tool": delete_file.pk, "allowed_functions": []}]},
                         format="json")
    assert narrowed.status_code == 200, narrowed.content
    _expired_by_service(tenant, member, approval, "function_not_allowed")
    assert target.exists()


def test_an_agent_unlinked_from_the_tool_gets_nothing_run(tenant: Any, api: Any, member: Any,
                                                          delete_file: Tool) -> None:
    target = workspace_file(tenant)
    approval, agent = _gateway_request(tenant, api, member, delete_file)
    assert api.patch(f"/api/v1/agents/{agent.pk}/", {"tools": []}, format="json").status_code == 200
    _expired_by_service(tenant, member, approval, "function_not_allowed")
    assert target.exists()


def test_a_requester_who_lost_use_agent_gets_nothing_run(tenant: Any, api: Any, member: Any,
                                                         delete_file: Tool) -> None:
    target = workspace_file(tenant)
    approval, agent = _gateway_request(tenant, api, member, delete_file)
    assign_perm("agents_app.use_agent", UserFactory(), agent)
    _expired_by_service(tenant, member, approval, "agent_not_usable")
    assert target.exists()


def test_held_arguments_that_differ_from_the_reviewed_ones_never_run(tenant: Any, member: Any,
                                                                    delete_file: Tool) -> None:
    workspace_file(tenant, "a.txt")
    other = workspace_file(tenant, "b.txt")
    approval_id = held_delete(member, delete_file)
    approval = Approval.objects.get(pk=approval_id)
    approval.held_arguments = {"path": "b.txt"}  # not what the person was shown
    approval.save(update_fields=["held_arguments"])
    expired_with(member, approval_id, "arguments_changed")
    assert other.exists()


def test_the_admin_queue_names_why_an_approval_expired(tenant: Any, member: Any, delete_file: Tool) -> None:
    from django.test import Client

    operator = UserFactory(is_staff=True)
    MembershipFactory(tenant=tenant, user=operator, role=Role.ADMIN)
    web = Client()
    web.force_login(operator)
    approval_id = held_delete(member, delete_file)
    assign_perm("tools_app.use_tool", UserFactory(), delete_file)
    expired_with(member, approval_id, "tool_not_usable")
    page = web.get("/admin/tools_app/approval/?status=expired")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"#{approval_id} delete_file.delete_file" in text
    assert "requester lost the right" in text and "use_tool" in text


# --- trial runs ---------------------------------------------------------------------------------------------


def test_dry_run_of_a_function_that_needs_approval_withholds_its_data(tenant: Any, api: Any, member: Any) -> None:
    from toolhub_demo.records import seed_records

    seed_records(tenant, None)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="read_record")
    Tool.objects.filter(pk=tool.pk).update(status=ToolStatus.ENABLED)
    gated = api.patch(f"/api/v1/tools/{tool.pk}/functions/read_record/", {"requires_approval": True}, format="json")
    assert gated.status_code == 200, gated.content
    from django.contrib.auth.models import Permission

    member.user.user_permissions.add(Permission.objects.get(codename="view_customer"))
    from toolhub_demo.models import Customer

    customer = Customer.objects.filter(tenant=tenant).order_by("pk").first()
    assert customer is not None
    arguments = {"model": "customer", "id": customer.pk}
    resp = member.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "read_record", "arguments": arguments,
                                                            "dry_run": True}, format="json")
    body = resp.json()
    assert resp.status_code == 200, body
    assert body["dry_run"] is True and body["data"] is None and customer.name not in resp.content.decode(), body
    assert body["result_withheld"] is True and "need a person's approval" in body["text"]
    row = ToolCall.objects.get(pk=body["call_id"])
    assert row.dry_run and customer.name not in row.result_excerpt
    # Without dry_run the same call is held for a person, as before.
    held = member.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "read_record", "arguments": arguments},
                       format="json").json()
    assert held["error_code"] == "APPROVAL_REQUIRED"
