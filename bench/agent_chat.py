"""Chat through the API: warm-pool reuse across requests, toolset assembly for a 50-tool agent, leak check.

Run: DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python bench/agent_chat.py
Uses a scratch SQLite database under a temporary directory (never the project's).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import child_processes, open_fds, summary

SCRATCH = Path(tempfile.mkdtemp(prefix="toolhub-bench-chat-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
os.environ["DATABASE_URL"] = f"sqlite:///{SCRATCH / 'bench.sqlite3'}"
os.environ.setdefault("TOOLHUB_VAR_DIR", str(SCRATCH / "var"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from agents_app import selectors  # noqa: E402
from agents_app.chat import chat_start  # noqa: E402
from agents_app.models import Agent, AgentTool  # noqa: E402
from agents_app.runtime.toolset import AgentLink, assemble  # noqa: E402
from agents_app.services import AgentInput, ChatModelInput, ToolLink, agent_create, chat_model_create  # noqa: E402
from agents_app.toolsets import build_toolset  # noqa: E402
from tenants_app.models import Membership, Role, Tenant  # noqa: E402
from tenants_app.services import token_for_user  # noqa: E402
from tests.fixtures.fake_llm import FakeLLM, Turn, call, text  # noqa: E402
from tests.fixtures.mcp_servers import INVENTORY, PYTHON  # noqa: E402
from tools_app.models import FunctionState, Tool, ToolFunction, ToolType  # noqa: E402
from tools_app.services import ToolInput, tool_create  # noqa: E402
from tools_app.services.discovery import probe_tool, store_functions  # noqa: E402
from tools_app.wiring import pool as wiring_pool  # noqa: E402

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def reply(body: dict[str, Any]) -> Turn:
    """Call the inventory tool for each new user message, then answer with its result."""
    last = (body.get("messages") or [{}])[-1]
    if last.get("role") == "user":
        return call("inventory__get_inventory", {"sku": "DEMO-001"})
    return text(f"stock: {last.get('content', '')[:40]}")


def setup(llm: FakeLLM) -> tuple[Tenant, Any, Agent, Agent]:
    call_command("migrate", verbosity=0, interactive=False)
    from django.contrib.auth import get_user_model

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    user = get_user_model().objects.create_user("bench", password="pw")
    Membership.objects.create(tenant=tenant, user=user, role=Role.OWNER)
    tool = tool_create(tenant=tenant, actor=user, data=ToolInput(
        name="inventory", type=ToolType.LOCAL, safety="READ_ONLY",
        config={"command": PYTHON, "args": [str(INVENTORY)], "startup_timeout_s": 30}))
    store_functions(tool=tool, offered=probe_tool(tool).functions)
    model = chat_model_create(tenant=tenant, actor=user, data=ChatModelInput(
        name="fake", base_url=llm.base_url, model="fake", api_key="bench-key"))
    agent = agent_create(tenant=tenant, actor=user, data=AgentInput(
        name="inv", model=model.pk, tools=[ToolLink(tool=tool.pk)], max_steps=4))
    big = agent_create(tenant=tenant, actor=user, data=AgentInput(name="big", model=model.pk))
    for i in range(50):
        t = Tool.objects.create(tenant=tenant, name=f"http-{i:02d}", type=ToolType.HTTP, config={},
                                safety="READ_ONLY")
        ToolFunction.objects.bulk_create(
            ToolFunction(tool=t, name=f"fn_{j}", description=f"function {j} of tool {i}", input_schema=SCHEMA,
                         schema_hash=f"{i}-{j}", approved_hash=f"{i}-{j}", state=FunctionState.ACTIVE)
            for j in range(4)
        )
        AgentTool.objects.create(agent=big, tool=t)
    return tenant, user, agent, big


def bench_requests(client: APIClient, agent: Agent, n: int) -> None:
    first = time.perf_counter()
    resp = client.post(f"/api/v1/agents/{agent.pk}/chat/", {"message": "DEMO-001?"}, format="json")
    first_ms = (time.perf_counter() - first) * 1000
    assert resp.status_code == 200 and resp.json()["status"] == "completed", resp.content
    before = wiring_pool.pool().stats()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        resp = client.post(f"/api/v1/agents/{agent.pk}/chat/", {"message": "DEMO-001?"}, format="json")
        samples.append((time.perf_counter() - started) * 1000)
        body = resp.json()
        assert body["status"] == "completed" and "12" in body["message"], body
    after = wiring_pool.pool().stats()
    print(f"chat request #1 (cold: spawns the MCP server): {first_ms:.1f} ms")
    print(f"chat requests #2..#{n + 1} (model turn + tool call + model turn each): {summary(samples)}")
    print(f"  processes spawned by requests #2..: {after['processes_spawned'] - before['processes_spawned']} (goal 0)")
    print(f"  sessions opened by requests #2..:   {after['sessions_opened'] - before['sessions_opened']} (goal 0)")


def bench_assembly(tenant: Tenant, user: Any, big: Agent, n: int) -> None:
    samples, pure = [], []
    candidates = selectors.function_candidates(tenant=tenant, tool_ids=list(
        big.agent_tools.values_list("tool_id", flat=True)))
    links = [AgentLink(link.tool_id) for link in big.agent_tools.all()]
    toolset = None
    for _ in range(n):
        agent = selectors.agent_get(tenant=tenant, agent_id=big.pk)
        started = time.perf_counter()
        toolset = build_toolset(tenant=tenant, actor=user, agent=agent)
        samples.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        assemble(tenant_id=tenant.pk, candidates=candidates, links=links, now=timezone.now())
        pure.append((time.perf_counter() - started) * 1000)
    assert toolset is not None and len(toolset) == 200
    print(f"toolset for an agent with 50 tools / 200 functions, with its DB reads: {summary(samples)}")
    print(f"  of which assemble() alone (Django-free): {summary(pure)}")


def bench_cycles(tenant: Tenant, user: Any, agent: Agent, cycles: int, full_every: int) -> None:
    """Assemble a run and close it (every `full_every`-th one runs to completion with a tool call)."""
    import gc

    def cycle(i: int) -> None:
        run = chat_start(tenant=tenant, actor=user, agent_id=agent.pk, message="DEMO-001?")
        if i % full_every == 0:
            for _ in run:
                pass
        run.close()

    for i in range(20):  # warm: pool session, HTTP client, DB connection
        cycle(i)
    gc.collect()
    fds0, kids0 = open_fds(), child_processes()
    started = time.perf_counter()
    for i in range(cycles):
        cycle(i)
    elapsed = time.perf_counter() - started
    gc.collect()
    fds1, kids1 = open_fds(), child_processes()
    print(f"{cycles} assemble/close cycles ({cycles // full_every} run to completion): {elapsed:.1f} s; "
          f"fds {fds0} -> {fds1}, child processes {kids0} -> {kids1}")
    assert fds1 <= fds0 + 2 and kids1 <= kids0, "leak"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=30, help="chat requests after the first")
    parser.add_argument("--assemblies", type=int, default=200)
    parser.add_argument("--cycles", type=int, default=1000)
    args = parser.parse_args()
    setup_test_environment()
    for noisy in ("httpx", "httpx2", "mcp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings.TOOLHUB_MODEL_TIMEOUT_S = 10
    llm = FakeLLM([reply], repeat_last=True, api_key="bench-key").start()
    try:
        tenant, user, agent, big = setup(llm)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_for_user(user=user)}")
        bench_requests(client, agent, args.n)
        bench_assembly(tenant, user, big, args.assemblies)
        bench_cycles(tenant, user, agent, args.cycles, full_every=10)
    finally:
        wiring_pool.pool().close_all()
        llm.stop()
        print(f"scratch database: {SCRATCH}", file=sys.stderr)


if __name__ == "__main__":
    main()
