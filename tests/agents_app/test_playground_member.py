"""A plain member (not staff) signs in at /accounts/login/ and chats in the playground with the browser's session:
the same requests the page's script makes (session cookie + CSRF header), approvals included."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tenants_app.models import Role
from tests.agents_app.support import builtin, make_agent, make_model
from tests.factories import MembershipFactory, UserFactory
from tests.fixtures.fake_llm import call, text
from tools_app.models import ToolCall
from tools_app.wiring.workspaces import workspace_for

# Tool calls run on worker threads with connections of their own: they must see committed rows.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_pool")]


def signed_in_member(tenant: Any, username: str = "mia") -> Client:
    user = UserFactory(username=username, password="pw-member-9", is_staff=False)
    MembershipFactory(tenant=tenant, user=user, role=Role.MEMBER)
    browser = Client(enforce_csrf_checks=True)  # a browser gets no CSRF exemption
    page = browser.get("/playground/")
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/")
    form = browser.get(page["Location"])
    token = form.cookies["csrftoken"].value
    resp = browser.post(page["Location"], {"username": username, "password": "pw-member-9",
                                           "csrfmiddlewaretoken": token})
    assert resp.status_code == 302 and resp["Location"] == "/playground/"
    return browser


def page_headers(browser: Client, tenant: Any) -> dict[str, str]:
    """What the playground's fetch() sends: the tenant header and the CSRF token of the page's cookie."""
    return {"X-Tenant": tenant.slug, "X-CSRFToken": browser.cookies["csrftoken"].value}


def test_a_plain_member_chats_and_decides_an_approval_in_the_playground(tenant: Any, api: Any,
                                                                          start_llm: Any) -> None:
    target = workspace_for(tenant) / "old.log"
    target.write_text("x")
    tool = builtin(tenant, "delete_file", enable=True)
    llm = start_llm([call("delete_file__delete_file", {"path": "old.log"}), text("Deleted old.log.")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool.pk}], name="janitor")
    browser = signed_in_member(tenant)
    page = browser.get("/playground/")
    html = page.content.decode()
    assert page.status_code == 200 and "janitor" in html and 'name="csrf-token"' in html
    assert "/admin/login/" not in html  # nothing on the page sends a member to the staff login
    h = page_headers(browser, tenant)
    assert browser.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "delete old.log"},
                        content_type="application/json").status_code == 403  # no CSRF header: refused
    body = browser.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "delete old.log"},
                        content_type="application/json", headers=h).json()
    required = next(e["data"] for e in body["events"] if e["event"] == "approval.required")
    assert body["status"] == "paused" and target.exists()
    decided = browser.post(f"/api/v1/approvals/{required['approval_id']}/approve/", {},
                           content_type="application/json", headers=h)
    assert decided.status_code == 200 and decided.json()["status"] == "approved"
    resumed = browser.post(f"/api/v1/conversations/{body['conversation_id']}/resume/", {},
                           content_type="application/json", headers=h).json()
    assert resumed["message"] == "Deleted old.log." and not target.exists()
    ran = ToolCall.objects.select_related("actor").get(conversation_id=body["conversation_id"], status="ok")
    assert ran.actor is not None and ran.actor.get_username() == "mia"
    # Reopening the conversation (a reload) works with the same session.
    again = browser.get(f"/playground/?tenant={tenant.slug}&conversation={body['conversation_id']}")
    assert again.status_code == 200 and f'data-conversation="{body["conversation_id"]}"' in again.content.decode()


def test_a_member_who_opens_the_admin_is_pointed_to_the_playground(tenant: Any) -> None:
    browser = signed_in_member(tenant, "noa")
    resp = browser.get("/admin/", follow=True)
    html = resp.content.decode()
    assert resp.redirect_chain[-1][0].startswith("/admin/login/")
    assert 'id="toolhub-member-note"' in html and 'href="/playground/"' in html
    anonymous = Client().get("/admin/login/").content.decode()
    assert 'href="/accounts/login/?next=/playground/"' in anonymous and 'id="toolhub-member-note"' not in anonymous


def test_the_sidebar_list_and_the_call_notation_the_page_relies_on(tenant: Any, api: Any, start_llm: Any) -> None:
    """The page redraws its sidebar from GET /api/v1/conversations/ after each run and decision, and names a call
    `<tool>__<function>` live and reopened: the server gives it the same facts both ways."""
    target = workspace_for(tenant) / "old.log"
    target.write_text("x")
    tool = builtin(tenant, "delete_file", enable=True)
    llm = start_llm([call("delete_file__delete_file", {"path": "old.log"}), text("Deleted old.log.")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool.pk}], name="janitor")
    browser = signed_in_member(tenant, "lou")
    html = browser.get("/playground/").content.decode()
    assert 'id="conversation-list"' in html and "None yet" in html
    h = page_headers(browser, tenant)
    body = browser.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "delete old.log"},
                        content_type="application/json", headers=h).json()
    cid = body["conversation_id"]
    listed = browser.get("/api/v1/conversations/?page_size=30", headers=h).json()["results"]
    assert [(c["id"], c["status"], c["agent_name"]) for c in listed] == [(cid, "awaiting_approval", "janitor")]
    assert "awaiting approval" in browser.get(f"/playground/?tenant={tenant.slug}").content.decode()
    required = next(e["data"] for e in body["events"] if e["event"] == "approval.required")
    browser.post(f"/api/v1/approvals/{required['approval_id']}/approve/", {}, content_type="application/json",
                 headers=h)
    resumed = browser.post(f"/api/v1/conversations/{cid}/resume/", {}, content_type="application/json",
                           headers=h).json()
    assert resumed["status"] == "completed"
    live = next(e["data"] for e in resumed["events"] if e["event"] == "tool.call")
    listed = browser.get("/api/v1/conversations/?page_size=30", headers=h).json()["results"]
    assert [(c["id"], c["status"]) for c in listed] == [(cid, "idle")]  # the badge's source is cleared
    page = browser.get(f"/playground/?tenant={tenant.slug}&conversation={cid}").content.decode()
    assert "awaiting approval" not in page.split('<div id="conversation-list">')[1].split("</aside>")[0]
    stored = browser.get(f"/api/v1/conversations/{cid}/", headers=h).json()
    reopened = [c["function"]["name"] for m in stored["messages"] for c in (m.get("tool_calls") or [])]
    assert live["name"] == reopened[0] == f"{required['tool']}__{required['function']}" == "delete_file__delete_file"
    # The page's script writes a call one way only (no `tool.function` joins left).
    script = page.split("<script>")[-1]
    assert '"__"' in script and '"." + data.function' not in script and '"." + result.function' not in script



def test_the_sidebar_names_what_a_paused_conversation_waits_for(tenant: Any, api: Any) -> None:
    from agents_app.models import Agent, Conversation

    make_agent(api, model=None, name="helper")
    browser = signed_in_member(tenant, "kai")
    user = UserFactory._meta.model.objects.get(username="kai")
    agent = Agent.objects.get(tenant=tenant, name="helper")
    Conversation.objects.create(tenant=tenant, agent=agent, user=user, title="needs a key",
                                status="awaiting_authorization")
    Conversation.objects.create(tenant=tenant, agent=agent, user=user, title="needs a yes", status="awaiting_approval")
    html = browser.get("/playground/").content.decode()
    sidebar = html.split('<div id="conversation-list">')[1].split("</aside>")[0]
    assert sidebar.count('<span class="badge">awaiting connection</span>') == 1
    assert sidebar.count('<span class="badge">awaiting approval</span>') == 1
    # The script's own redraw names them the same way, and says what a paused run waits for.
    script = html.split("<script>")[-1]
    assert 'awaiting_authorization: "awaiting connection"' in script and "Waiting for you to connect" in script
