"""The admin works in one tenant at a time: switcher, and nothing of another tenant anywhere."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from agents_app.models import Agent
from tenants_app.models import Role
from tests.factories import MembershipFactory, ToolFactory, UserFactory
from tools_app.models import Tool, ToolCall

pytestmark = pytest.mark.django_db


def admin_client(*tenants: Any, superuser: bool = False) -> Client:
    user = UserFactory(is_staff=True, is_superuser=superuser)
    for t in tenants:
        MembershipFactory(tenant=t, user=user, role=Role.ADMIN)
    client = Client()
    client.force_login(user)
    return client


def seed(tenant: Any, word: str) -> Tool:
    tool = ToolFactory(tenant=tenant, name=f"{word}-tool", description=f"{word} secret plans")
    ToolCall.objects.create(tenant=tenant, tool=tool, tool_name=tool.name, function=f"{word}_fn", status="ok")
    Agent.objects.create(tenant=tenant, name=f"{word}-agent")
    return tool


PAGES = ["/admin/", "/admin/tools_app/tool/", "/admin/tools_app/toolcall/", "/admin/tools_app/toolfunction/",
         "/admin/tools_app/approval/?status=all", "/admin/agents_app/agent/", "/admin/agents_app/conversation/",
         "/admin/tenants_app/membership/", "/admin/market_app/marketsource/",
         "/admin/agents_app/agent/add/"]


def test_a_tenant_admin_sees_nothing_of_another_tenant(tenant: Any, other_tenant: Any) -> None:
    seed(tenant, "alpha")
    theirs = seed(other_tenant, "omega")
    client = admin_client(tenant)
    for page in PAGES:
        resp = client.get(page)
        assert resp.status_code == 200, page
        html = resp.content.decode()
        assert "omega" not in html and other_tenant.slug not in html, page
    assert b"alpha-tool" in client.get("/admin/tools_app/tool/").content
    # Autocomplete, change page and history of a foreign object: nothing.
    for term, found in (("omega", []), ("tool", ["alpha-tool"])):
        auto = client.get("/admin/autocomplete/", {"app_label": "agents_app", "model_name": "agenttool",
                                                   "field_name": "tool", "term": term})
        assert auto.status_code == 200
        assert [r["text"] for r in auto.json()["results"]] == found
    for url in (f"/admin/tools_app/tool/{theirs.pk}/change/", f"/admin/tools_app/tool/{theirs.pk}/history/"):
        resp = client.get(url, follow=True)
        assert b"omega" not in resp.content or b"doesn" in resp.content, url
        assert b"secret plans" not in resp.content


def test_switching_tenants_changes_every_list(tenant: Any, other_tenant: Any) -> None:
    seed(tenant, "alpha")
    seed(other_tenant, "omega")
    client = admin_client(tenant, other_tenant)
    home = client.get("/admin/").content.decode()
    assert 'id="toolhub-tenant-select"' in home and f">{tenant.slug} —" in home and f">{other_tenant.slug} —" in home
    listing = client.get("/admin/tools_app/tool/").content
    assert b"alpha-tool" in listing and b"omega-tool" not in listing
    resp = client.post("/admin/tenant/", {"tenant": other_tenant.pk, "next": "/admin/tools_app/tool/5/change/"})
    assert resp.status_code == 302 and resp["Location"] == "/admin/tools_app/tool/"
    listing = client.get("/admin/tools_app/tool/").content
    assert b"omega-tool" in listing and b"alpha-tool" not in listing
    calls = client.get("/admin/tools_app/toolcall/").content
    assert b"omega_fn" in calls and b"alpha_fn" not in calls


def test_switching_to_a_tenant_you_do_not_manage_changes_nothing(tenant: Any, other_tenant: Any) -> None:
    seed(tenant, "alpha")
    seed(other_tenant, "omega")
    client = admin_client(tenant)
    client.post("/admin/tenant/", {"tenant": other_tenant.pk})
    listing = client.get("/admin/tools_app/tool/").content
    assert b"alpha-tool" in listing and b"omega-tool" not in listing


def test_new_objects_go_to_the_current_tenant_only(tenant: Any, other_tenant: Any) -> None:
    client = admin_client(tenant, other_tenant)
    page = client.get("/admin/agents_app/agent/add/").content.decode()
    # The header names the tenant; the form carries it without a second tenant select beside the switcher.
    assert f'<input type="hidden" name="tenant" value="{tenant.pk}" data-context="available-source" id="id_tenant">' \
        in page and 'class="form-row hidden field-tenant"' in page
    assert 'id="id_tenant"' in page and '<select name="tenant" id="id_tenant"' not in page
    resp = client.post("/admin/agents_app/agent/add/", {
        "tenant": other_tenant.pk, "name": "sneaky", "max_steps": 4, "status": "ENABLED", "routing": "all",
        "agent_tools-TOTAL_FORMS": 0, "agent_tools-INITIAL_FORMS": 0})
    assert resp.status_code == 200 and not Agent.objects.filter(name="sneaky").exists()


def test_the_last_tenant_is_remembered_at_the_next_login(tenant: Any, other_tenant: Any) -> None:
    user = UserFactory(username="two-hats", password="pw-two-hats", is_staff=True)
    for t in (tenant, other_tenant):
        MembershipFactory(tenant=t, user=user, role=Role.ADMIN)
    seed(tenant, "alpha")
    seed(other_tenant, "omega")
    client = Client()
    assert client.login(username="two-hats", password="pw-two-hats")
    assert b"alpha-tool" in client.get("/admin/tools_app/tool/").content  # first by slug at the first login
    client.post("/admin/tenant/", {"tenant": other_tenant.pk})
    client.post("/admin/logout/")  # as the browser does: the session ends, the browser's cookies stay
    assert client.login(username="two-hats", password="pw-two-hats")
    listing = client.get("/admin/tools_app/tool/").content
    assert b"omega-tool" in listing and b"alpha-tool" not in listing
    # Someone else signing in on the same browser is not sent to a tenant they do not manage.
    client.post("/admin/logout/")
    MembershipFactory(tenant=tenant, user=UserFactory(username="one-hat", password="pw-one-hat", is_staff=True),
                      role=Role.ADMIN)
    assert client.login(username="one-hat", password="pw-one-hat")
    assert b"alpha-tool" in client.get("/admin/tools_app/tool/").content


def test_names_are_readable(tenant: Any) -> None:
    tool = seed(tenant, "alpha")
    call = ToolCall.objects.get(tool=tool)
    assert str(tool) == "alpha-tool"
    assert str(call).startswith("alpha-tool.alpha_fn (ok")
    page = admin_client(tenant).get(f"/admin/tools_app/toolcall/{call.pk}/change/").content.decode()
    assert "ToolCall object" not in page and f"{tenant.pk}:alpha-tool" not in page


def test_sections_are_ordered_by_use(tenant: Any) -> None:
    html = admin_client(tenant, superuser=True).get("/admin/").content.decode()
    order = [html.index(f'class="app-{label} module') for label in ("tools_app", "agents_app", "market_app",
                                                                         "tenants_app")]
    assert order == sorted(order)
    tools = html[order[0]:order[1]]
    assert tools.index("Tools") < tools.index("Approvals") < tools.index("Tool calls")


def test_superuser_also_works_in_one_tenant(tenant: Any, other_tenant: Any) -> None:
    seed(tenant, "alpha")
    seed(other_tenant, "omega")
    client = admin_client(superuser=True)
    listing = client.get("/admin/tools_app/tool/").content
    assert (b"alpha-tool" in listing) != (b"omega-tool" in listing)


def test_every_model_names_itself() -> None:
    from django.apps import apps
    from django.db import models

    ours = ("tenants_app", "tools_app", "agents_app", "market_app", "identity_app", "toolhub_demo")
    unnamed = [m.__name__ for m in apps.get_models()
               if m.__module__.split(".")[0] in ours and m.__str__ is models.Model.__str__]
    assert unnamed == []


def test_the_last_tenant_is_remembered_in_another_browser_too(tenant: Any, other_tenant: Any) -> None:
    user = UserFactory(username="roamer", password="pw-roamer", is_staff=True)
    for t in (tenant, other_tenant):
        MembershipFactory(tenant=t, user=user, role=Role.ADMIN)
    seed(tenant, "alpha")
    seed(other_tenant, "omega")
    laptop = Client()
    assert laptop.login(username="roamer", password="pw-roamer")
    laptop.post("/admin/tenant/", {"tenant": other_tenant.pk})
    phone = Client()  # no session, no cookie of the laptop's: the membership remembers
    assert phone.login(username="roamer", password="pw-roamer")
    listing = phone.get("/admin/tools_app/tool/").content
    assert b"omega-tool" in listing and b"alpha-tool" not in listing
    assert f'<option value="{other_tenant.pk}" selected>'.encode() in phone.get("/admin/").content
    # Switching back on the phone is what the laptop finds at its next sign-in.
    phone.post("/admin/tenant/", {"tenant": tenant.pk})
    laptop.logout()
    assert laptop.login(username="roamer", password="pw-roamer")
    listing = laptop.get("/admin/tools_app/tool/").content
    assert b"alpha-tool" in listing and b"omega-tool" not in listing


def test_a_member_of_two_tenants_lands_in_the_last_one_in_the_playground(tenant: Any, other_tenant: Any) -> None:
    user = UserFactory(username="duo", password="pw-duo", is_staff=False)
    for t in (tenant, other_tenant):
        MembershipFactory(tenant=t, user=user, role=Role.MEMBER)
    Agent.objects.create(tenant=tenant, name="alpha-agent")
    Agent.objects.create(tenant=other_tenant, name="omega-agent")
    browser = Client()
    assert browser.login(username="duo", password="pw-duo")
    first = browser.get("/playground/").content.decode()
    assert "Pick a tenant" in first  # never used one yet: the choice is theirs
    chosen = browser.get(f"/playground/?tenant={other_tenant.slug}").content.decode()
    assert "omega-agent" in chosen and f'href="?tenant={tenant.slug}"' in chosen  # and a way back
    browser.logout()
    again = Client()
    assert again.login(username="duo", password="pw-duo")
    page = again.get("/playground/").content.decode()
    assert "omega-agent" in page and "alpha-agent" not in page and "Pick a tenant" not in page


ADD_PAGES = ["/admin/tools_app/tool/add/", "/admin/agents_app/agent/add/", "/admin/agents_app/chatmodel/add/",
             "/admin/agents_app/intentnode/add/", "/admin/tenants_app/membership/add/",
             "/admin/market_app/marketsource/add/"]


@pytest.mark.parametrize("superuser", [False, True])
def test_no_add_form_repeats_the_tenant_select_beside_the_switcher(tenant: Any, other_tenant: Any,
                                                                      superuser: bool) -> None:
    client = admin_client(tenant, other_tenant, superuser=superuser)
    for page in ADD_PAGES:
        html = client.get(page).content.decode()
        assert 'id="toolhub-tenant-select"' in html, page  # the header's switcher names the tenant
        assert html.count('name="tenant"') == 2, page  # the switcher's select and the form's own field
        select = re.split(r'<select name="tenant"[^>]*id="id_tenant">', html, maxsplit=1)
        if len(select) == 1:
            assert f'<input type="hidden" name="tenant" value="{tenant.pk}"' in html, page
            continue
        # Only a superuser's market source may be global: "this tenant or every tenant", never another tenant.
        assert superuser and page == "/admin/market_app/marketsource/add/", page
        options = select[1].split("</select>", 1)[0]
        assert "(global: every tenant)" in options and other_tenant.slug not in options, page
