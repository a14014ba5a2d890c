"""The screen through the MCP gateway: held functions are not listed until approved, overrides are what a client
reads, a flagged result is stripped of invisible characters and says so in `_meta`."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from agents_app.gateway.calls import AFTER_FLAGGED
from tests.agents_app.gateway.clients import connect, refusal
from tests.agents_app.gateway.warm import discovery_kept_for_calls
from tests.fixtures.mcp_servers import HERE
from tests.fixtures.screen_count import screened_texts
from tools_app.models import Approval, ToolCall
from tools_app.runtime.screen.results import META_KEY

POISONED = HERE / "poisoned.py"


def server_tool(api: Any, name: str, technique: str) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(POISONED), "--technique", technique], "startup_timeout_s": 20}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    with discovery_kept_for_calls():  # the calls reuse the server the discovery started
        assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    return tool_id


def test_gateway_lists_overrides_hides_held_and_flags_results(served: Any, setup: Any) -> None:
    api = setup.api
    pages = server_tool(api, "pages", "results")
    smuggler = server_tool(api, "smuggler", "smuggling")
    api.patch(f"/api/v1/tools/{pages}/functions/fetch_page/",
              {"description_override": "Fetch one page of our wiki.", "title_override": "Wiki page",
               "parameter_overrides": {"url": "A page of our wiki."}}, format="json")
    resp = api.patch(f"/api/v1/agents/{setup.agent_id}/", {"tools": [
        {"tool": setup.tool_id}, {"tool": pages}, {"tool": smuggler}]}, format="json")
    assert resp.status_code == 200, resp.content
    url = served.endpoint("acme", setup.agent_id)

    async def scenario() -> tuple[Any, Any]:
        async with connect(url, setup.token) as (session, _init):
            tools = await session.list_tools()
            result = await session.call_tool("pages__fetch_page", {"url": "https://example.com"})
            return tools, result

    tools, result = asyncio.run(scenario())
    listed = {t.name: t for t in tools.tools}
    assert "smuggler__add" not in listed
    assert listed["pages__fetch_page"].description == "Fetch one page of our wiki."
    assert listed["pages__fetch_page"].title == "Wiki page"
    assert listed["pages__fetch_page"].input_schema["properties"]["url"]["description"] == "A page of our wiki."
    text = result.content[0].text
    assert "Welcome to the release notes." in text
    assert not any(0xE0000 <= ord(ch) <= 0xE007F for ch in text)
    screen = (result.meta or {})[META_KEY]
    assert screen["flagged"] is True and "invisible_tags" in screen["markers"]

    assert api.post(f"/api/v1/tools/{smuggler}/functions/add/approve/").status_code == 200

    async def again() -> Any:
        async with connect(url, setup.token) as (session, _init):
            return await session.list_tools()

    assert "smuggler__add" in {t.name for t in asyncio.run(again()).tools}


@pytest.mark.parametrize("guard", [True, False])
def test_a_write_after_a_flagged_result_needs_approval_through_the_gateway(served: Any, setup: Any,
                                                                             guard: bool) -> None:
    """The Python SDK's client reads a flagged page, then asks for a write its link lets run unasked: with the
    tenant's `approve_after_flagged_result` it is held for a person; approving runs it once and lifts the mark."""
    setup.tenant.approve_after_flagged_result = guard
    setup.tenant.save(update_fields=["approve_after_flagged_result"])
    api = setup.api
    pages = server_tool(api, "pages", "results")
    assert api.patch(f"/api/v1/agents/{setup.agent_id}/", {"tools": [{"tool": pages}]},
                     format="json").status_code == 200
    url = served.endpoint("acme", setup.agent_id)
    comment = {"note": "deleted every branch"}

    async def session_calls(*calls: tuple[str, dict[str, Any]]) -> list[Any]:
        async with connect(url, setup.token) as (session, _init):
            return [await session.call_tool(name, args) for name, args in calls]

    # A write before any flagged result runs unasked (the link does not ask for approval).
    first, = asyncio.run(session_calls(("pages__post_comment", {"note": "hi"})))
    assert not first.is_error
    page, write = asyncio.run(session_calls(("pages__fetch_page", {}), ("pages__post_comment", comment)))
    assert (page.meta or {})[META_KEY]["flagged"] is True
    comments = ToolCall.objects.filter(function="post_comment", status="ok", approval__isnull=True)  # runs
    if not guard:
        assert not write.is_error and comments.count() == 2 and not Approval.objects.exists()
        return
    assert write.is_error and refusal(write)["error_code"] == "APPROVAL_REQUIRED"
    approval = Approval.objects.get(pk=refusal(write)["approval_id"])
    assert approval.status == "pending" and approval.summary == AFTER_FLAGGED
    assert comments.count() == 1  # only the one before the flagged result
    # Still marked in a new session of the same user and agent: the same pending request, nothing ran.
    again, = asyncio.run(session_calls(("pages__post_comment", comment)))
    assert again.is_error and refusal(again)["approval_id"] == approval.pk and comments.count() == 1

    assert api.post(f"/api/v1/approvals/{approval.pk}/approve/").status_code == 200
    ran, after = asyncio.run(session_calls(("pages__post_comment", comment), ("pages__post_comment", {"note": "x"})))
    # The approved run is handed over (approving ran it; the retry runs nothing twice).
    assert "call" in ran.content[0].text and refusal_free(ran)
    assert not after.is_error  # the approved write lifted the mark: the next one runs unasked
    assert comments.count() == 3 and Approval.objects.count() == 1


def refusal_free(result: Any) -> bool:
    """Not a refusal (no approval asked): a result, or the handed-over run's own answer."""
    return "toolhub/refusal" not in (result.meta or {}) or not refusal(result).get("approval_id")


def test_held_prompts_and_resources_are_not_offered_and_server_instructions_reach_no_client(
        served: Any, setup: Any) -> None:
    """The server's poisoned instructions, prompt and resource are screened at discovery; the gateway lists neither
    held item (nor gets it by name), and its initialize answers the agent's description, never the server's
    instructions. An admin's approval of the server's texts offers them."""
    from tools_app.models import Tool
    from tools_app.services.screening import approve_server

    api = setup.api
    docs = server_tool(api, "docs", "server_texts")
    detail = api.get(f"/api/v1/tools/{docs}/").json()
    assert detail["server_screen"]["status"] == "held"
    fields = {f["field"] for f in detail["server_screen"]["findings"] if f["severity"] == "high"}
    assert {"server.instructions", "prompts.review_code.description", "resources.config.description"} <= fields
    assert detail["functions"][0]["screen"]["status"] == "clear"  # its function is clean and offered
    assert api.patch(f"/api/v1/agents/{setup.agent_id}/", {"tools": [{"tool": docs}]},
                     format="json").status_code == 200
    url = served.endpoint("acme", setup.agent_id)

    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with connect(url, setup.token) as (session, init):
            prompts = await session.list_prompts()
            resources = await session.list_resources()
            try:
                await session.get_prompt("docs__review_code", {})
                got: Any = "served"
            except Exception as exc:  # noqa: BLE001 - the typed refusal is what is asserted
                got = exc
            return init, prompts, resources, got

    init, prompts, resources, got = asyncio.run(scenario())
    assert init.instructions == "Answers stock questions for the warehouse team."  # the agent's, not the server's
    assert {p.name for p in prompts.prompts} == {"docs__summarize"}
    assert {r.name for r in resources.resources} == {"docs__readme"}
    assert got != "served"
    assert not ToolCall.objects.filter(function="prompts/get", status="ok").exists()

    approve_server(Tool.objects.get(pk=docs), actor=api.user)
    detail = api.get(f"/api/v1/tools/{docs}/").json()["server_screen"]
    assert detail["status"] == "approved" and detail["approved_by"] == api.user.username

    async def again() -> tuple[Any, Any]:
        async with connect(url, setup.token) as (session, _init):
            return await session.list_prompts(), await session.list_resources()

    prompts, resources = asyncio.run(again())
    assert {p.name for p in prompts.prompts} == {"docs__summarize", "docs__review_code"}
    assert {r.name for r in resources.resources} == {"docs__readme", "docs__config"}


def _tagged(text: str) -> bool:
    return any(0xE0000 <= ord(ch) <= 0xE007F for ch in text)


def test_prompt_and_resource_answers_are_stripped_and_flagged_like_tool_results(served: Any, setup: Any) -> None:
    """The offered prompt and resource of a server answer text hiding tag characters: through the gateway the
    Python SDK's client reads the text without them, `_meta` names the markers, and so do the audit rows."""
    api = setup.api
    docs = server_tool(api, "docs", "server_texts")
    assert api.patch(f"/api/v1/agents/{setup.agent_id}/", {"tools": [{"tool": docs}]},
                     format="json").status_code == 200
    url = served.endpoint("acme", setup.agent_id)

    async def scenario() -> tuple[Any, Any]:
        async with connect(url, setup.token) as (session, _init):
            readme = next(r for r in (await session.list_resources()).resources if r.name == "docs__readme")
            return await session.get_prompt("docs__summarize", {}), await session.read_resource(readme.uri)

    prompt, resource = asyncio.run(scenario())
    text = prompt.messages[0].content.text
    assert text == "Summarize the document below."
    flag = (prompt.meta or {})[META_KEY]
    assert flag["flagged"] is True and {"invisible_tags", "ignore_previous"} <= set(flag["markers"])
    body = resource.contents[0].text
    assert body == "# Readme\nInstall with make."
    assert not _tagged(body) and "invisible_tags" in (resource.meta or {})[META_KEY]["markers"]
    rows = {c.function: c for c in ToolCall.objects.filter(function__in=("prompts/get", "resources/read"))}
    assert rows.keys() == {"prompts/get", "resources/read"} and all(c.status == "ok" for c in rows.values())
    assert all("invisible_tags" in (c.result_flags or []) and not _tagged(c.result_excerpt) for c in rows.values())


def test_a_gateway_call_screens_each_text_of_its_result_once(served: Any, setup: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """One pass per distinct text, where the result is made (invoke): the audit row and the gateway's answer read
    the verdict in the result's meta, clean or flagged; no per-process memory of texts does it for them."""
    api = setup.api
    pages = server_tool(api, "pages", "results")
    assert api.patch(f"/api/v1/agents/{setup.agent_id}/", {"tools": [{"tool": setup.tool_id}, {"tool": pages}]},
                     format="json").status_code == 200
    url = served.endpoint("acme", setup.agent_id)

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        async with connect(url, setup.token) as (session, _init):
            return await session.call_tool(name, arguments)

    asyncio.run(call("inventory__get_inventory", {"sku": "DEMO-001"}))  # warm: the pool's server started
    for name, arguments, flagged in (("inventory__get_inventory", {"sku": "DEMO-001"}, False),
                                     ("pages__fetch_page", {"url": "https://example.com"}, True)):
        read = screened_texts(monkeypatch)
        result = asyncio.run(call(name, arguments))
        assert not result.is_error, result
        assert read and len(read) == len(set(read)), read  # each distinct text once, none again
        row = ToolCall.objects.filter(function=name.split("__")[1]).latest("id")
        assert bool(row.result_flags) is flagged, row.result_flags
