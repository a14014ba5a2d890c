"""A real uvicorn server running config.asgi's router (gateway + Django) on loopback, and a demo agent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from agents_app.models import Agent
from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.agents_app.gateway.warm import discovery_kept_for_calls
from tests.agents_app.support import inventory_tool, make_agent
from tests.fixtures.mcp_servers import INVENTORY, MINI, free_port, wait_listening
from tests.tools_app.discovered import Discovered
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
def own_served(transactional_db: Any) -> Iterator[Served]:
    """A server (a gateway) of the test's own, for a test that stops or breaks it; others take `served`."""
    with running_server() as one:
        yield one
    pool().close_all()


@pytest.fixture(scope="module")
def module_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Served]:
    """One server (one gateway) for every test of a module: starting and stopping uvicorn and its gateway per test
    cost a few seconds each on a loaded machine. Each test still commits its own rows (and the database is emptied
    after it), and the pool's server processes are closed after each test (`module_served`); the gateway keeps
    nothing of a test but closed sessions, and its caches are keyed by generations the per-test cache clear renews."""
    with django_db_blocker.unblock(), running_server() as one:
        yield one


@pytest.fixture
def module_served(module_server: Served, transactional_db: Any) -> Iterator[Served]:
    """The module's server for one test (as `served`, started once per module: see `module_server`)."""
    yield module_server
    pool().close_all()


@pytest.fixture
def served(module_served: Served) -> Served:
    """The module's one server (`module_server`) for this test: a server per test cost a uvicorn and gateway start
    and stop each (~1-3 s on a loaded machine); a test that stops or breaks its server takes `own_served`."""
    return module_served


@pytest.fixture(scope="module")
def module_server_pair(django_db_setup: Any, django_db_blocker: Any) -> Iterator[tuple[Served, Served]]:
    """Two servers for every test of a module that asks for a pair (as `module_server`, two of them)."""
    with django_db_blocker.unblock(), running_server() as first, running_server() as second:
        yield first, second


@pytest.fixture
def served_pair(module_server_pair: tuple[Served, Served], transactional_db: Any) -> Iterator[tuple[Served, Served]]:
    """Two Toolhub web servers (two gateways) behind which one client is served: shared DB and cache. The module's
    pair (`module_server_pair`); a test that needs two servers built under its own settings takes `own_served_pair`."""
    yield module_server_pair
    pool().close_all()


@pytest.fixture
def own_served_pair(transactional_db: Any) -> Iterator[tuple[Served, Served]]:
    """Two servers of the test's own, built after its settings (e.g. a REDIS_URL read when a gateway starts)."""
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


def build_setup(tenant: Any, member_client: Any, *, discover: bool = True,
                listings: Discovered | None = None, server: Path = MINI) -> Setup:
    """`listings`: the inventory's listing probed once per module (`listed_once`), not once per test: a test whose
    calls never reach the server (refused, held, declined, listings only) then starts none; one that does starts it
    on its first call, as a client's first call does. `server`: the inventory's (`inventory_server`)."""
    api = member_client(tenant, Role.ADMIN)
    with discovery_kept_for_calls(), listings.probes() if listings else nullcontext():
        tool_id = inventory_tool(api, discover=discover, server=server)
    agent_id = make_agent(api, model=None, tools=[{"tool": tool_id}], name="helper",
                          description="Answers stock questions for the warehouse team.")
    return Setup(tenant=tenant, api=api, token=token_for_user(user=api.user), agent_id=agent_id, tool_id=tool_id)


def inventory_server(request: Any) -> Path:
    """The inventory tool's server for the requesting test: MINI (its tools, no SDK: milliseconds to start) unless
    the test relays the SDK-built one's prompts and resources or its own answers: the module names those tests in
    `SDK_INVENTORY` (or sets `INVENTORY_SERVER = INVENTORY` for all of them), as a start of the SDK-built server costs
    ~1.2 s of CPU (tests/fixtures/mcp_servers/stdio_core.py says which to use when)."""
    if request.node.originalname in getattr(request.module, "SDK_INVENTORY", ()):
        return INVENTORY
    return Path(getattr(request.module, "INVENTORY_SERVER", MINI))


@pytest.fixture
def setup(transactional_db: Any, tenant: Any, member_client: Any, request: Any) -> Setup:
    """Tenant acme: an admin, the inventory tool (stdio MCP) and agent `helper` linked to it."""
    return build_setup(tenant, member_client, server=inventory_server(request))


@pytest.fixture(scope="module")
def module_listings() -> Discovered:
    return Discovered()


@pytest.fixture
def listed_once(transactional_db: Any, tenant: Any, member_client: Any, module_listings: Discovered,
                request: Any) -> Setup:
    """`setup` with the inventory's listing probed once per module (its first test's real probe, kept by
    `Discovered`): the discovery's server start (~1.2 s of CPU, the MCP SDK's imports) is paid only by tests whose
    calls reach the server. A module whose tests all take it overrides `setup` with it."""
    return build_setup(tenant, member_client, listings=module_listings, server=inventory_server(request))


@pytest.fixture
def setup_undiscovered(transactional_db: Any, tenant: Any, member_client: Any, request: Any) -> Setup:
    """`setup` with the tool saved but not discovered (its server never started, no functions known): for tests of
    what the gateway decides before any tool runs (sessions, Host and Origin, OAuth), a server start each saved."""
    return build_setup(tenant, member_client, discover=False, server=inventory_server(request))
