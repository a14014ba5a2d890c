"""A real uvicorn server running config.asgi's router (gateway + Django) on loopback, and a demo agent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from agents_app.models import Agent
from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.support import inventory_tool, make_agent
from tests.fixtures.mcp_servers import free_port, wait_listening
from tools_app.wiring.pool import pool


@dataclass
class Served:
    base_url: str
    app: Any

    def endpoint(self, slug: str, agent_id: int) -> str:
        return f"{self.base_url}/mcp/{slug}/agents/{agent_id}/"


@contextmanager
def running_server() -> Iterator[Served]:
    """Uvicorn in a thread with its own gateway; rows the test commits are visible to its worker threads."""
    from config.asgi import build_application

    app = build_application()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_listening(port)
    try:
        yield Served(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        thread.join(15)


@pytest.fixture
def served(transactional_db: Any) -> Iterator[Served]:
    with running_server() as one:
        yield one
    pool().close_all()


@pytest.fixture
def served_pair(transactional_db: Any) -> Iterator[tuple[Served, Served]]:
    """Two Toolhub web servers (two gateways) behind which one client is served: shared DB and cache."""
    with running_server() as first, running_server() as second:
        yield first, second
    pool().close_all()


@dataclass
class Setup:
    tenant: Any
    api: Any
    token: str
    agent_id: int
    tool_id: int

    @property
    def agent(self) -> Agent:
        return Agent.objects.get(pk=self.agent_id)


def build_setup(tenant: Any, member_client: Any, *, discover: bool = True) -> Setup:
    api = member_client(tenant, Role.ADMIN)
    tool_id = inventory_tool(api, discover=discover)
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="helper",
                          description="Answers stock questions for the warehouse team.")
    return Setup(tenant=tenant, api=api, token=token_for_user(user=api.user), agent_id=agent_id, tool_id=tool_id)


@pytest.fixture
def setup(transactional_db: Any, tenant: Any, member_client: Any) -> Setup:
    """Tenant acme: an admin, the inventory tool (stdio MCP) and agent `helper` linked to it."""
    return build_setup(tenant, member_client)


@pytest.fixture
def setup_undiscovered(transactional_db: Any, tenant: Any, member_client: Any) -> Setup:
    """`setup` with the tool saved but not discovered (its server never started, no functions known): for tests of
    what the gateway decides before any tool runs (sessions, Host and Origin, OAuth), a server start each saved."""
    return build_setup(tenant, member_client, discover=False)
