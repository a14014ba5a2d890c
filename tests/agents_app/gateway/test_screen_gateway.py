"""The screen through the MCP gateway: held functions are not listed until approved, overrides are what a client
reads, a flagged result is stripped of invisible characters and says so in `_meta`."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from tests.agents_app.gateway.clients import connect
from tests.fixtures.mcp_servers import HERE
from tools_app.runtime.screen.results import META_KEY

POISONED = HERE / "poisoned.py"


def server_tool(api: Any, name: str, technique: str) -> int:
    resp = api.post("/api/v1/tools/", {"name": name, "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(POISONED), "--technique", technique], "startup_timeout_s": 20}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
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
