"""Helpers shared by the agents API tests: models, agents, the inventory tool, chat calls, SSE parsing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agents_app.models import Agent, ChatModel
from tests.fixtures.fake_llm import FakeLLM
from tests.fixtures.mcp_servers import MINI
from tools_app.models import Tool, ToolStatus, ToolType

MODEL_KEY = "sk-canary-7Hq2Zp91"


def make_model(api: Any, llm: FakeLLM | None = None, *, base_url: str = "", api_key: str = MODEL_KEY,
               name: str = "fake", params: dict[str, Any] | None = None) -> int:
    resp = api.post("/api/v1/models/", {"name": name, "base_url": base_url or (llm.base_url if llm else ""),
                                        "model": "fake-model", "api_key": api_key, "params": params or {}},
                    format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def make_agent(api: Any, *, model: int | None, tools: list[dict[str, Any]] | None = None, name: str = "helper",
               **extra: Any) -> int:
    body = {"name": name, "model": model, "tools": tools or [], **extra}
    resp = api.post("/api/v1/agents/", body, format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def inventory_tool(api: Any, *, discover: bool = True, server: Path = MINI, **config: Any) -> int:
    """The inventory tool, discovered unless `discover` is False. Its server is MINI (the inventory's tools without
    the SDK: milliseconds to start) unless a test of what the SDK serves passes `server=INVENTORY` (1.2 s of CPU a
    start: see tests/fixtures/mcp_servers/stdio_core.py for which to use when)."""
    resp = api.post("/api/v1/tools/", {"name": "inventory", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(server)], "startup_timeout_s": 20, "call_timeout_s": 10, **config}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    if discover:
        assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    return tool_id


def builtin(tenant: Any, name: str, *, enable: bool = False) -> Tool:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name=name)
    if enable and tool.status != ToolStatus.ENABLED:
        tool.status = ToolStatus.ENABLED
        tool.save(update_fields=["status"])
    return tool


def chat(client: Any, agent_id: int, message: str, *, conversation_id: int | None = None,
         status: int = 200) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message}
    if conversation_id is not None:
        body["conversation_id"] = conversation_id
    resp = client.post(f"/api/v1/agents/{agent_id}/chat/", body, format="json")
    assert resp.status_code == status, resp.content
    return dict(resp.json())


def events(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [e["data"] for e in body["events"] if e["event"] == name]


def parse_sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def agent_row(agent_id: int) -> Agent:
    return Agent.objects.get(pk=agent_id)


def model_row(model_id: int) -> ChatModel:
    return ChatModel.objects.get(pk=model_id)
