"""The `mcp` Python SDK client (streamable HTTP and SSE) against the gateway on a real uvicorn server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents_app.services.chat import build_toolset
from tests.agents_app.gateway.clients import connect
from tools_app.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_lists_and_calls_the_agents_functions(served: Any, setup: Any, transport: str) -> None:
    url = served.endpoint("acme", setup.agent_id)

    async def scenario() -> tuple[Any, Any, Any]:
        async with connect(url, setup.token, transport=transport) as (session, init):
            tools = await session.list_tools()
            result = await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})
            return init, tools, result

    init, tools, result = asyncio.run(scenario())
    assert init.server_info.name == "toolhub/helper"
    assert init.instructions == "Answers stock questions for the warehouse team."
    toolset, _ = build_toolset(tenant=setup.tenant, actor=setup.api.user, agent=setup.agent)
    assert [t.name for t in tools.tools] == toolset.names()
    listed = {t.name: t for t in tools.tools}
    fn = toolset.get("inventory__get_inventory")
    assert fn is not None
    assert listed[fn.qualified_name].input_schema == fn.parameters
    assert listed[fn.qualified_name].description == fn.description
    assert listed[fn.qualified_name].annotations.read_only_hint is False  # the tool's safety is WRITE
    assert listed[fn.qualified_name].annotations.destructive_hint is False
    assert listed[fn.qualified_name].annotations.title
    assert not result.is_error
    assert "DEMO-001" in result.content[0].text
    call = ToolCall.objects.get(function="get_inventory")
    assert call.agent_id == setup.agent_id and call.via == "gateway" and call.actor_id == setup.api.user.pk
