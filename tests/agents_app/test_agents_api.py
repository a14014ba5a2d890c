"""Models and agents CRUD: write-only keys, tenant-checked tool links, roles, the admin and the playground page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from agents_app.models import Agent, AgentTool, ChatModel
from tenants_app.models import Role
from tests.agents_app.support import MODEL_KEY, make_agent, make_model
from tests.factories import MembershipFactory, ToolFactory, UserFactory
from tools_app.models import ToolFunction

pytestmark = pytest.mark.django_db


def test_api_key_is_write_only_and_kept(api: Any) -> None:
    model_id = make_model(api, base_url="http://127.0.0.1:9/v1")
    stored = ChatModel.objects.get(pk=model_id)
    assert stored.api_key == MODEL_KEY
    # The column holds ciphertext only.
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT api_key FROM agents_app_chatmodel WHERE id = %s", [model_id])
        assert MODEL_KEY not in cur.fetchone()[0]
    for resp in (api.get("/api/v1/models/"), api.get(f"/api/v1/models/{model_id}/")):
        assert resp.status_code == 200 and MODEL_KEY not in resp.content.decode()
    assert api.get(f"/api/v1/models/{model_id}/").json()["api_key_set"] is True
    api.patch(f"/api/v1/models/{model_id}/", {"api_key": "********", "model": "m2"}, format="json")
    api.patch(f"/api/v1/models/{model_id}/", {"params": {"temperature": 0.1}}, format="json")
    stored.refresh_from_db()
    assert (stored.api_key, stored.model, stored.params) == (MODEL_KEY, "m2", {"temperature": 0.1})
    api.patch(f"/api/v1/models/{model_id}/", {"api_key": ""}, format="json")
    stored.refresh_from_db()
    assert stored.api_key is None


def test_model_validation(api: Any) -> None:
    bad_url = api.post("/api/v1/models/", {"name": "x", "base_url": "file:///etc", "model": "m"}, format="json")
    assert bad_url.status_code == 400
    assert (bad_url.json()["error"]["code"], bad_url.json()["error"]["details"]) == ("agent_error", {"field": "base_url"})
    reserved = api.post("/api/v1/models/", {"name": "x", "base_url": "http://h/v1", "model": "m",
                                            "params": {"tools": []}}, format="json")
    assert reserved.status_code == 400 and reserved.json()["error"]["code"] == "agent_error"
    assert reserved.json()["error"]["details"]["field"] == "params" and "tools" in reserved.json()["error"]["details"]["reserved"]
    masked = api.post("/api/v1/models/", {"name": "x", "base_url": "http://h/v1", "model": "m",
                                          "api_key": "********"}, format="json")
    assert masked.status_code == 400 and masked.json()["error"]["details"] == {"field": "api_key"}
    unknown = api.post("/api/v1/models/", {"name": "x", "base_url": "http://h/v1", "model": "m", "key": "k"},
                       format="json")
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "invalid"
    assert list(unknown.json()["error"]["details"]) == ["key"] and "accepted" in unknown.json()["error"]["details"]["key"][0]


def test_model_in_use_cannot_be_deleted(api: Any) -> None:
    model_id = make_model(api, base_url="http://127.0.0.1:9/v1")
    make_agent(api, model=model_id)
    resp = api.delete(f"/api/v1/models/{model_id}/")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "model_in_use"


def functions(tool: Any, *names: str) -> Any:
    for name in names:
        ToolFunction.objects.create(tool=tool, name=name, input_schema={"type": "object"})
    return tool


def test_agent_crud_with_tool_links(tenant: Any, api: Any) -> None:
    tool = functions(ToolFactory(tenant=tenant, name="inv"), "a", "b")
    agent_id = make_agent(api, model=None, tools=[{"tool": tool.pk, "allowed_functions": ["b", "a"],
                                                   "requires_approval": True}], system_prompt="be brief")
    body = api.get(f"/api/v1/agents/{agent_id}/").json()
    assert body["tools"] == [{"tool": tool.pk, "tool_name": "inv", "allowed_functions": ["a", "b"],
                              "requires_approval": True}]
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"tools": []}, format="json").json()["tools"] == []
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"max_steps": 0}, format="json").status_code == 400
    dup = api.post("/api/v1/agents/", {"name": "helper"}, format="json")
    assert dup.status_code == 409 and dup.json()["error"]["code"] == "name_taken"
    assert api.delete(f"/api/v1/agents/{agent_id}/").status_code == 204
    assert not Agent.objects.exists()


def test_foreign_tool_or_model_fails_the_whole_write(tenant: Any, other_tenant: Any, api: Any, other_api: Any) -> None:
    mine = ToolFactory(tenant=tenant, name="mine")
    foreign = ToolFactory(tenant=other_tenant, name="theirs")
    resp = api.post("/api/v1/agents/", {"name": "a1", "tools": [{"tool": mine.pk}, {"tool": foreign.pk}]},
                    format="json")
    missing = api.post("/api/v1/agents/", {"name": "a1", "tools": [{"tool": 999999}]}, format="json")
    assert resp.status_code == missing.status_code == 404 and resp.json() == missing.json()
    assert not Agent.objects.exists() and not AgentTool.objects.exists()
    agent_id = make_agent(api, model=None, tools=[{"tool": mine.pk}])
    patch = api.patch(f"/api/v1/agents/{agent_id}/", {"name": "renamed", "tools": [{"tool": foreign.pk}]},
                      format="json")
    assert patch.status_code == 404
    agent = Agent.objects.get(pk=agent_id)
    assert agent.name == "helper" and list(agent.agent_tools.values_list("tool_id", flat=True)) == [mine.pk]
    their_model = make_model(other_api, base_url="http://127.0.0.1:9/v1")
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"model": their_model}, format="json").status_code == 404
    assert other_api.get(f"/api/v1/agents/{agent_id}/").status_code == 404
    assert other_api.get("/api/v1/agents/").json()["count"] == 0


def test_roles(tenant: Any, api: Any, member_client: Any) -> None:
    member = member_client(tenant, Role.MEMBER)
    assert member.post("/api/v1/agents/", {"name": "x"}, format="json").status_code == 403
    assert member.get("/api/v1/models/").status_code == 403
    agent_id = make_agent(api, model=None)
    assert [a["id"] for a in member.get("/api/v1/agents/").json()["results"]] == [agent_id]
    viewer = member_client(tenant, Role.VIEWER)
    assert viewer.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "hi"}, format="json").status_code == 403
    api.patch(f"/api/v1/agents/{agent_id}/", {"status": "DISABLED"}, format="json")
    assert member.get("/api/v1/agents/").json()["count"] == 0
    resp = member.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "hi"}, format="json")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "agent_disabled"


def test_a_misspelt_allowed_function_is_refused_naming_the_accepted_ones(tenant: Any, api: Any) -> None:
    tool = functions(ToolFactory(tenant=tenant, name="inv"), "get_stock", "set_price")
    bare = ToolFactory(tenant=tenant, name="undiscovered")
    resp = api.post("/api/v1/agents/", {"name": "typo", "tools": [
        {"tool": tool.pk, "allowed_functions": ["get_stock", "get_stok"]}]}, format="json")
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["code"] == "unknown_functions"
    assert error["details"] == {"field": "tools.allowed_functions", "tool": tool.pk, "tool_name": "inv",
                                "unknown": ["get_stok"], "accepted": ["get_stock", "set_price"]}
    assert not Agent.objects.filter(name="typo").exists()
    agent_id = make_agent(api, model=None, tools=[{"tool": tool.pk, "allowed_functions": ["get_stock"]}])
    patched = api.patch(f"/api/v1/agents/{agent_id}/", {"tools": [
        {"tool": tool.pk, "allowed_functions": ["set_prize"]}]}, format="json")
    assert patched.status_code == 400 and patched.json()["error"]["details"]["unknown"] == ["set_prize"]
    # A tool nobody has discovered yet has no names to check against: null (all) is the only choice.
    undiscovered = api.patch(f"/api/v1/agents/{agent_id}/", {"tools": [
        {"tool": bare.pk, "allowed_functions": ["anything"]}]}, format="json")
    assert undiscovered.status_code == 400 and undiscovered.json()["error"]["code"] == "unknown_functions"
    assert undiscovered.json()["error"]["details"]["accepted"] == []  # no known functions yet
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"tools": [{"tool": bare.pk, "allowed_functions": None}]},
                     format="json").status_code == 200
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"tools": [{"tool": tool.pk, "allowed_functions": []}]},
                     format="json").status_code == 200


def _admin_browser(tenant: Any) -> Client:
    user = UserFactory(is_staff=True, is_superuser=True)
    MembershipFactory(tenant=tenant, user=user, role=Role.OWNER)
    client = Client()
    client.force_login(user)
    return client


def test_admin_pages_never_show_the_key(tenant: Any, api: Any) -> None:
    model_id = make_model(api, base_url="http://127.0.0.1:9/v1")
    agent_id = make_agent(api, model=model_id)
    browser = _admin_browser(tenant)
    pages = ["/admin/", "/admin/agents_app/chatmodel/", f"/admin/agents_app/chatmodel/{model_id}/change/",
             "/admin/agents_app/agent/", f"/admin/agents_app/agent/{agent_id}/change/",
             "/admin/agents_app/conversation/", "/playground/"]
    for page in pages:
        resp = browser.get(page)
        assert resp.status_code == 200, page
        assert MODEL_KEY not in resp.content.decode(), page
    assert b"Chat playground" in browser.get("/admin/").content


def test_admin_saves_through_services(tenant: Any, api: Any) -> None:
    model_id = make_model(api, base_url="http://127.0.0.1:9/v1")
    browser = _admin_browser(tenant)
    resp = browser.post(f"/admin/agents_app/chatmodel/{model_id}/change/", {
        "name": "fake", "base_url": "http://127.0.0.1:9/v1", "model": "other", "params": "{}", "api_key_input": "",
    })
    assert resp.status_code == 302, resp.content.decode()[:2000]
    stored = ChatModel.objects.get(pk=model_id)
    assert (stored.model, stored.api_key) == ("other", MODEL_KEY)
    tool = ToolFactory(tenant=tenant, name="inv")
    resp = browser.post("/admin/agents_app/agent/add/", {
        "tenant": tenant.pk, "name": "admin-made", "description": "", "system_prompt": "", "model": model_id,
        "max_steps": 4, "status": "ENABLED",
        "agent_tools-TOTAL_FORMS": 1, "agent_tools-INITIAL_FORMS": 0, "agent_tools-MIN_NUM_FORMS": 0,
        "agent_tools-MAX_NUM_FORMS": 1000, "agent_tools-0-tool": tool.pk, "agent_tools-0-functions_mode": "all",
        "agent_tools-0-approval": "", "routing": "all", "routing_threshold": "", "knowledge_function": "",
    })
    assert resp.status_code == 302, resp.content.decode()[:3000]
    agent = Agent.objects.get(name="admin-made")
    assert list(agent.agent_tools.values_list("tool_id", flat=True)) == [tool.pk]


def agent_form(tenant: Any, tool: Any, **row: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tenant": tenant.pk, "name": "picky", "description": "", "system_prompt": "Be brief, typed with care",
        "model": "", "max_steps": 6, "status": "ENABLED", "routing": "intent", "routing_threshold": "0.4",
        "knowledge_function": "inv__get_stock",
        "agent_tools-TOTAL_FORMS": 1, "agent_tools-INITIAL_FORMS": 0, "agent_tools-MIN_NUM_FORMS": 0,
        "agent_tools-MAX_NUM_FORMS": 1000, "agent_tools-0-tool": tool.pk, "agent_tools-0-functions_mode": "only",
        "agent_tools-0-functions": ["get_stock", "get_stok"], "agent_tools-0-approval": "yes",
    }
    data.update({f"agent_tools-0-{k}": v for k, v in row.items()})
    return data


def test_admin_function_picker_and_a_refused_name_at_its_row(tenant: Any, other_tenant: Any) -> None:
    tool = functions(ToolFactory(tenant=tenant, name="inv"), "get_stock", "set_price")
    foreign = functions(ToolFactory(tenant=other_tenant, name="theirs"), "secret_fn")
    browser = _admin_browser(tenant)
    # The picker of a chosen tool: its known functions, and only this tenant's tools.
    picker = browser.get(f"/admin/agents_app/agent/tool-functions/{tool.pk}/").json()
    assert [f["value"] for f in picker["functions"]] == ["get_stock", "set_price"]
    assert browser.get(f"/admin/agents_app/agent/tool-functions/{foreign.pk}/").status_code == 404
    # A misspelt name: the service refuses it, the page keeps everything and says so at the row's picker.
    resp = browser.post("/admin/agents_app/agent/add/", agent_form(tenant, tool))
    assert resp.status_code == 200
    row = resp.context["inline_admin_formsets"][0].formset.forms[0]
    assert list(row.errors) == ["functions"]
    assert "get_stok" in row.errors["functions"][0] and "accepted: get_stock, set_price" in row.errors["functions"][0]
    html = resp.content.decode()
    assert "Be brief, typed with care" in html and 'value="get_stok"' in html and "Not saved" not in html
    assert not Agent.objects.filter(name="picky").exists()
    # Fixed: the link, the three-way approval choice and the routing settings are saved through the service.
    resp = browser.post("/admin/agents_app/agent/add/", agent_form(tenant, tool, functions=["get_stock"]))
    assert resp.status_code == 302, resp.content.decode()[:3000]
    agent = Agent.objects.get(name="picky")
    link = agent.agent_tools.get()
    assert (link.allowed_functions, link.requires_approval) == (["get_stock"], True)
    assert (agent.routing, agent.routing_threshold, agent.knowledge_function) == ("intent", 0.4, "inv__get_stock")
    page = browser.get(f"/admin/agents_app/agent/{agent.pk}/change/").content.decode()
    ticked = set(re.findall(r'<input type="(?:checkbox|radio)" name="agent_tools-0-(\w+)" value="(\w+)"[^>]*checked', page))
    assert ticked == {("functions", "get_stock"), ("functions_mode", "only"), ("approval", "yes")}
    assert 'value="set_price"' in page
    assert "allowed_functions" not in page and ">null<" not in page  # no hand-written JSON left
    resp = browser.post(f"/admin/agents_app/agent/{agent.pk}/change/", {
        **agent_form(tenant, tool, functions_mode="all", functions=[], approval="no"),
        "agent_tools-INITIAL_FORMS": 1, "agent_tools-0-id": link.pk, "agent_tools-0-agent": agent.pk,
        "routing": "all", "routing_threshold": "", "always_on": ["inv__set_price"]})
    assert resp.status_code == 302, resp.content.decode()[:3000]
    agent.refresh_from_db()
    link = agent.agent_tools.get()
    assert (link.allowed_functions, link.requires_approval) == (None, False)
    assert (agent.routing, agent.routing_threshold, agent.always_on) == ("all", None, ["inv__set_price"])


def test_routing_refs_must_name_known_functions(tenant: Any, other_tenant: Any, api: Any) -> None:
    functions(ToolFactory(tenant=tenant, name="inv"), "get_stock", "search_docs")
    functions(ToolFactory(tenant=other_tenant, name="theirs"), "secret_fn")
    resp = api.post("/api/v1/agents/", {"name": "kb", "routing": "intent", "knowledge_function": "inv__serch_docs"},
                    format="json")
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["code"] == "unknown_functions"
    assert error["details"] == {"field": "knowledge_function", "unknown": ["inv__serch_docs"]}
    resp = api.post("/api/v1/agents/", {"name": "kb", "always_on": ["inv__get_stock", "theirs__secret_fn"]},
                    format="json")
    assert resp.status_code == 400 and resp.json()["error"]["details"] == {
        "field": "always_on", "unknown": ["theirs__secret_fn"]}  # another tenant's function is unknown here
    assert not Agent.objects.filter(name="kb").exists()
    agent_id = make_agent(api, model=None, name="kb", routing="intent", knowledge_function="inv__search_docs",
                          always_on=["inv__get_stock"])
    # A stored ref whose tool went away since does not block other edits; only new refs are checked.
    ToolFunction.objects.filter(tool__tenant=tenant, name="get_stock").delete()
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"always_on": ["inv__get_stock"], "description": "kept"},
                     format="json").status_code == 200
    assert api.patch(f"/api/v1/agents/{agent_id}/", {"always_on": ["inv__get_stok"]},
                     format="json").status_code == 400


def test_admin_refused_routing_ref_shows_at_its_field(tenant: Any) -> None:
    tool = functions(ToolFactory(tenant=tenant, name="inv"), "get_stock", "set_price")
    browser = _admin_browser(tenant)
    form = {**agent_form(tenant, tool, functions=["get_stock"]), "knowledge_function": "inv__get_stok"}
    resp = browser.post("/admin/agents_app/agent/add/", form)
    assert resp.status_code == 200
    assert list(resp.context["adminform"].form.errors) == ["knowledge_function"]
    html = resp.content.decode()
    assert 'value="inv__get_stok"' in html and "Be brief, typed with care" in html
    assert not Agent.objects.filter(name="picky").exists()


def test_agent_list_names_the_model_an_agent_chats_with(tenant: Any, api: Any, settings: Any) -> None:
    make_agent(api, model=None, name="demo-chatter")
    browser = _admin_browser(tenant)
    settings.TOOLHUB_DEMO_MODEL_URL = ""
    assert "none (chat fails until one is picked)" in browser.get("/admin/agents_app/agent/").content.decode()
    settings.TOOLHUB_DEMO_MODEL_URL = "http://127.0.0.1:9/v1"
    page = browser.get("/admin/agents_app/agent/").content.decode()
    assert '<td class="field-model_shown">demo model</td>' in page
    assert 'name="base_url"' in browser.get("/admin/agents_app/chatmodel/add/").content.decode()


def test_the_agent_page_links_to_the_playground_with_the_agent_chosen(tenant: Any, api: Any) -> None:
    make_agent(api, model=None, name="first")
    agent_id = make_agent(api, model=None, name="second")
    browser = _admin_browser(tenant)
    page = browser.get(f"/admin/agents_app/agent/{agent_id}/change/").content.decode()
    link = f"/playground/?tenant={tenant.slug}&amp;agent={agent_id}"
    assert f'href="{link}"' in page
    chat = browser.get(link.replace("&amp;", "&")).content.decode()
    assert f'<option value="{agent_id}" selected>second</option>' in chat


def test_playground_requires_login_and_lists_usable_agents(tenant: Any, api: Any, member_client: Any) -> None:
    assert Client().get("/playground/").status_code == 302
    agent_id = make_agent(api, model=None, name="visible")
    member = member_client(tenant, Role.MEMBER)
    page = Client()
    page.force_login(member.user)
    html = page.get("/playground/").content.decode()
    assert "visible" in html and f'value="{agent_id}"' in html and "csrf-token" in html
    assert page.get("/playground/?tenant=globex").status_code == 404


def test_demo_seeder_links_the_inventory_tool(tenant: Any, settings: Any) -> None:
    from toolhub_demo.agents import AGENT_NAME, seed_agents
    from toolhub_demo.seed import demo_seeders

    assert seed_agents in demo_seeders()
    user = UserFactory()
    MembershipFactory(tenant=tenant, user=user, role=Role.OWNER)
    assert seed_agents(tenant, user) == []
    tool = ToolFactory(tenant=tenant, name="inventory")
    settings.TOOLHUB_DEMO_MODEL_URL = "http://127.0.0.1:9/v1"
    lines = seed_agents(tenant, user)
    assert AGENT_NAME in lines[0] and "demo model" in lines[0]
    agent = Agent.objects.get(tenant=tenant, name=AGENT_NAME)
    assert agent.model is None and [link.tool_id for link in agent.agent_tools.all()] == [tool.pk]
    seed_agents(tenant, user)
    assert Agent.objects.filter(tenant=tenant).count() == 1
