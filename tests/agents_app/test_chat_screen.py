"""The screen in chat: held functions are not offered, overrides are, tool results lose their invisible characters
and are flagged, and a consequential call after a flagged result waits for a person."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.agents_app.support import chat, events, make_agent, make_model
from tests.fixtures.fake_llm import call, text
from tests.fixtures.mcp_servers import HERE
from tools_app.models import ToolCall
from tools_app.runtime.screen.results import NOTICE_PREFIX

pytestmark = pytest.mark.django_db(transaction=True)

POISONED = HERE / "poisoned.py"
TAGS = range(0xE0000, 0xE0080)


@pytest.fixture(autouse=True)
def _pool(close_pool: None) -> None:
    return None


def server_tool(api: Any, name: str, technique: str) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(POISONED), "--technique", technique], "startup_timeout_s": 20}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    return tool_id


def offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in request.get("tools") or []}


def test_held_functions_are_not_offered_and_overrides_are(api: Any, start_llm: Any) -> None:
    pages = server_tool(api, "pages", "results")
    smuggler = server_tool(api, "smuggler", "smuggling")
    patched = api.patch(f"/api/v1/tools/{pages}/functions/fetch_page/",
                        {"description_override": "Fetch one page of our wiki.", "title_override": "Wiki page"},
                        format="json")
    assert patched.status_code == 200, patched.content
    fn = patched.json()
    assert fn["description"] == "Fetches a web page and returns its text."  # the upstream's, kept for drift
    assert (fn["description_override"], fn["title_override"]) == ("Fetch one page of our wiki.", "Wiki page")
    llm = start_llm([text("hello")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": pages}, {"tool": smuggler}])
    chat(api, agent_id, "hi")
    tools = offered(llm.requests[0])
    assert tools["pages__fetch_page"]["description"] == "Fetch one page of our wiki."
    assert "smuggler__add" not in tools
    # Once an admin approves it, the held function is offered (as the server describes it).
    assert api.post(f"/api/v1/tools/{smuggler}/functions/add/approve/").json()["screen"]["status"] == "approved"
    llm2 = start_llm([text("hello")])
    agent2 = make_agent(api, model=make_model(api, llm2, name="fake2"), tools=[{"tool": smuggler}], name="two")
    chat(api, agent2, "hi")
    assert "smuggler__add" in offered(llm2.requests[0])
    # A blank override restores the upstream's text.
    api.patch(f"/api/v1/tools/{pages}/functions/fetch_page/", {"description_override": ""}, format="json")
    detail = {f["name"]: f for f in api.get(f"/api/v1/tools/{pages}/").json()["functions"]}
    assert detail["fetch_page"]["description_override"] == ""
    options = next(t for t in api.get("/api/v1/tools/options/").json() if t["id"] == pages)
    assert {f["name"]: f["description"] for f in options["functions"]}["fetch_page"] == \
        "Fetches a web page and returns its text."


def test_tag_characters_never_reach_the_model_and_the_result_is_flagged(api: Any, start_llm: Any) -> None:
    pages = server_tool(api, "pages", "results")
    llm = start_llm([call("pages__fetch_page", {"url": "https://example.com"}), text("done")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": pages}])
    body = chat(api, agent_id, "read the release notes")
    read = llm.requests[1]["messages"]
    tool_messages = [m for m in read if m["role"] == "tool"]
    assert tool_messages and "Welcome to the release notes." in tool_messages[0]["content"]
    assert not any(ord(ch) in TAGS for m in read for ch in str(m.get("content") or ""))
    assert NOTICE_PREFIX in tool_messages[0]["content"]
    result = events(body, "tool.result")[0]
    assert result["screen"]["flagged"] is True
    assert {"invisible_tags", "ignore_previous"} <= set(result["screen"]["markers"])
    assert not any(ord(ch) in TAGS for ch in result["content"])
    audit = ToolCall.objects.get(function="fetch_page")
    assert {"invisible_tags", "ignore_previous"} <= set(audit.result_flags or [])
    assert not any(ord(ch) in TAGS for ch in audit.result_excerpt)


@pytest.mark.parametrize("guard", [True, False])
def test_a_write_after_a_flagged_result_needs_approval(tenant: Any, api: Any, start_llm: Any, guard: bool) -> None:
    tenant.approve_after_flagged_result = guard
    tenant.save(update_fields=["approve_after_flagged_result"])
    pages = server_tool(api, "pages", "results")
    llm = start_llm([call("pages__fetch_page", {}), call("pages__post_comment", {"note": "deleted"}), text("done")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": pages}])
    body = chat(api, agent_id, "read the release notes")
    held = events(body, "approval.required")
    if guard:
        assert body["status"] == "paused" and held[0]["function"] == "post_comment"
        assert not ToolCall.objects.filter(function="post_comment", status="ok").exists()
    else:
        assert held == [] and ToolCall.objects.filter(function="post_comment", status="ok").exists()


def test_a_write_without_a_flagged_result_runs_unasked(api: Any, start_llm: Any) -> None:
    pages = server_tool(api, "pages", "results")
    llm = start_llm([call("pages__post_comment", {"note": "hi"}), text("done")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": pages}])
    body = chat(api, agent_id, "comment")
    assert events(body, "approval.required") == []
    assert events(body, "tool.result")[0]["screen"] == {"flagged": False, "markers": []}


def test_parameter_override_reaches_the_model_and_unknown_parameters_are_refused(api: Any, start_llm: Any) -> None:
    pages = server_tool(api, "pages", "results")
    bad = api.patch(f"/api/v1/tools/{pages}/functions/fetch_page/", {"parameter_overrides": {"nope": "x"}},
                    format="json")
    assert bad.status_code == 400 and bad.json()["error"]["details"]["accepted"] == ["url"]
    ok = api.patch(f"/api/v1/tools/{pages}/functions/fetch_page/",
                   {"parameter_overrides": {"url": "A page of our wiki."}}, format="json")
    assert ok.status_code == 200 and ok.json()["parameter_overrides"] == {"url": "A page of our wiki."}
    assert ok.json()["input_schema"]["properties"]["url"]["description"] == "The page's URL."  # upstream's kept
    llm = start_llm([text("hello")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": pages}])
    chat(api, agent_id, "hi")
    params = offered(llm.requests[0])["pages__fetch_page"]["parameters"]
    assert params["properties"]["url"]["description"] == "A page of our wiki."
    api.patch(f"/api/v1/tools/{pages}/functions/fetch_page/", {"parameter_overrides": {"url": ""}}, format="json")
    fn = {f["name"]: f for f in api.get(f"/api/v1/tools/{pages}/").json()["functions"]}["fetch_page"]
    assert fn["parameter_overrides"] == {}
