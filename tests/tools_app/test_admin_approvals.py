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
from tools_app.models import Approval, ApprovalStatus, CallStatus, Tool, ToolCall, ToolStatus, ToolType
from tools_app.wiring.workspaces import workspace_for

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
    path = Path(workspace_for(tenant)) / name
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
    resp = web.post(f"/admin/tools_app/approval/{approval_id}/decide/", {"decision": "approve", "confirmed": "yes"},
                    follow=True)
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
    assert 'value="Yes, deny 2 requests (3 calls)"' in confirm
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


def test_approving_a_destructive_call_asks_first_and_links_the_call_it_ran(tenant: Any, operator: Any) -> None:
    api, web = operator
    tool = enabled_builtin(tenant, "delete_file")
    target = workspace_file(tenant, "precious.db")
    approval_id = held_delete(api, tool, "precious.db")
    held = Approval.objects.get(pk=approval_id).tool_call
    decide = f"/admin/tools_app/approval/{approval_id}/decide/"
    assert ">Approve…</button>" in web.get("/admin/tools_app/approval/").content.decode()  # says a step follows
    # One click shows the call and its warning; nothing runs yet.
    confirm = web.post(decide, {"decision": "approve"})
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert 'id="destructive-warning"' in html and "This call is DESTRUCTIVE" in html and "precious.db" in html
    assert f'action="{decide}"' in html and 'name="decision" value="approve"' in html
    assert 'name="confirmed" value="yes"' in html and "No, go back" in html
    assert f"Approve #{approval_id} delete_file.delete_file?" in html and 'value="Yes, approve it and run it now"' in html
    assert target.exists() and Approval.objects.get(pk=approval_id).status == ApprovalStatus.PENDING
    # Confirmed: it runs, and the message links the approval and the call that ran.
    done = web.post(decide, {"decision": "approve", "confirmed": "yes"}, follow=True)
    approval = Approval.objects.get(pk=approval_id)
    ran = approval.result_call
    assert approval.status == ApprovalStatus.APPROVED and ran is not None and ran.status == CallStatus.OK
    assert not target.exists()
    said = " ".join(str(m) for m in done.context["messages"])
    assert f'<a href="/admin/tools_app/toolcall/{ran.pk}/change/" class="toolhub-result-call">call #{ran.pk}</a>' in said
    assert f'href="/admin/tools_app/approval/{approval_id}/change/"' in said and "it ran: OK" in said
    assert f'href="/admin/tools_app/toolcall/{ran.pk}/change/"' in done.content.decode()  # rendered as a link
    # The approval's page links both audit rows; each call's page links back to the approval.
    detail = web.get(f"/admin/tools_app/approval/{approval_id}/change/").content.decode()
    assert f'<a href="/admin/tools_app/toolcall/{held.pk}/change/" id="toolhub-held-call">call #{held.pk}</a>' in detail
    assert f'<a href="/admin/tools_app/toolcall/{ran.pk}/change/" id="toolhub-result-call">call #{ran.pk}</a>' in detail
    for call in (held, ran):
        page = web.get(f"/admin/tools_app/toolcall/{call.pk}/change/").content.decode()
        assert f'<a href="/admin/tools_app/approval/{approval_id}/change/" id="toolhub-approval">' in page
        assert f'href="/admin/tools_app/tool/{tool.pk}/change/"' in page  # and on to the tool


def test_a_destructive_deny_and_a_safe_approve_take_one_click(tenant: Any, operator: Any) -> None:
    api, web = operator
    deleting = enabled_builtin(tenant, "delete_file")
    denied = held_delete(api, deleting, "keep.txt")
    web.post(f"/admin/tools_app/approval/{denied}/decide/", {"decision": "deny"})
    assert Approval.objects.get(pk=denied).status == ApprovalStatus.DENIED
    reading = enabled_builtin(tenant, "read_file")
    Tool.objects.filter(pk=reading.pk).update(requires_approval=True)  # asks a person, but is READ_ONLY
    workspace_file(tenant, "notes.txt")
    resp = api.post(f"/api/v1/tools/{reading.pk}/invoke/", {"function": "read_file", "arguments": {"path": "notes.txt"}},
                    format="json")
    approval_id = resp.json()["approval_id"]
    assert ">Approve</button>" in web.get("/admin/tools_app/approval/").content.decode()
    done = web.post(f"/admin/tools_app/approval/{approval_id}/decide/", {"decision": "approve"}, follow=True)
    assert "it ran: OK" in done.content.decode() and 'id="destructive-warning"' not in done.content.decode()
    assert Approval.objects.get(pk=approval_id).status == ApprovalStatus.APPROVED


def test_a_batch_approval_names_its_destructive_calls(tenant: Any, operator: Any) -> None:
    api, web = operator
    tool = enabled_builtin(tenant, "delete_file")
    ids = [held_delete(api, tool, "x.txt"), held_delete(api, tool, "y.txt")]
    page = web.post("/admin/tools_app/approval/", {"action": "approve_selected", "_selected_action": ids})
    assert "2 of these calls are DESTRUCTIVE" in page.content.decode()
    assert set(Approval.objects.filter(pk__in=ids).values_list("status", flat=True)) == {ApprovalStatus.PENDING}


def test_a_try_from_the_admin_is_audited_as_from_the_admin(tenant: Any, operator: Any) -> None:
    _, web = operator
    reading = enabled_builtin(tenant, "read_file")
    workspace_file(tenant, "hello.txt")
    page = web.post(f"/admin/tools_app/tool/{reading.pk}/try/", {"function": "read_file", "arg:path": "hello.txt"})
    assert page.status_code == 200 and 'id="toolhub-result"' in page.content.decode()
    call = ToolCall.objects.filter(tool=reading).latest("pk")
    assert (call.via, call.status) == ("admin", CallStatus.OK)
    listing = web.get("/admin/tools_app/toolcall/?via=admin").content.decode()
    assert "Admin (Try)" in listing and f"/admin/tools_app/toolcall/{call.pk}/change/" in listing
    tool_page = web.get(f"/admin/tools_app/tool/{reading.pk}/change/").content.decode()
    assert "<td>Admin (Try)</td>" in tool_page.split('id="toolhub-recent-calls"')[1]
    # A held Try is an approval from the admin, linked from the Try page, and approving it runs it (as the admin).
    deleting = enabled_builtin(tenant, "delete_file")
    target = workspace_file(tenant, "gone.txt")
    held = web.post(f"/admin/tools_app/tool/{deleting.pk}/try/", {"function": "delete_file", "arg:path": "gone.txt"})
    approval = Approval.objects.get(tool_call__tool=deleting)
    assert approval.via == "admin" and approval.tool_call.via == "admin"
    assert f'href="/admin/tools_app/approval/{approval.pk}/change/" id="toolhub-held-approval"' in held.content.decode()
    queue = web.get("/admin/tools_app/approval/").content.decode()
    assert "Try on the tool&#x27;s admin page" in queue and "direct call (API)" not in queue
    web.post(f"/admin/tools_app/approval/{approval.pk}/decide/", {"decision": "approve", "confirmed": "yes"})
    approval.refresh_from_db()
    assert approval.result_call is not None and approval.result_call.via == "admin" and not target.exists()
