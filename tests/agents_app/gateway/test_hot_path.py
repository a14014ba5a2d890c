"""The gateway's hot path: a warm tools/call resolves the caller and the agent's toolset from memory and writes
only its audit row; every change that alters tools/list is seen on the next message (and by list_changed)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.gateway import service
from tests import loopback
from tests.waiting import scaled
from tools_app.wiring.pool import pool

NAME = "inventory__get_inventory"
ARGS = {"sku": "DEMO-001"}


@pytest.fixture(autouse=True)
def _close_pool() -> Any:
    yield
    pool().close_all()


def principal(setup: Any) -> service.Principal:
    found = service.authenticate(token=setup.token, tenant_slug=setup.tenant.slug, agent_id=str(setup.agent_id))
    assert found is not None
    return found


def test_a_warm_call_queries_only_to_write_its_audit_row(setup: Any) -> None:
    first = service.call_function(principal(setup), NAME, ARGS)
    assert first.result.success, first.result
    with CaptureQueriesContext(connection) as ctx:
        who = principal(setup)
        fingerprint = service.fingerprint(who)
        done = service.call_function(who, NAME, ARGS)
        secrets = service.secrets_of(who, done.function)
    assert done.result.success and fingerprint and secrets == []
    queries = [q["sql"] for q in ctx.captured_queries]
    assert len(queries) == 1 and queries[0].startswith('INSERT INTO "tools_app_toolcall"'), queries


def test_a_change_reaches_the_next_listing_and_call(setup: Any) -> None:
    who = principal(setup)
    before = service.fingerprint(who)
    assert NAME in {f.name for f in service.list_functions(who)}
    resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"enabled": False},
                           format="json")
    assert resp.status_code == 200, resp.content
    who = principal(setup)
    assert NAME not in {f.name for f in service.list_functions(who)}
    assert service.fingerprint(who) != before  # what makes the watcher send list_changed
    refused = service.call_function(who, NAME, ARGS)
    assert refused.result.error_code == "DISABLED" and refused.result.error_reason == "function_disabled"


def test_an_agent_edit_and_a_disable_reach_the_next_message(setup: Any) -> None:
    who = principal(setup)
    assert service.call_function(who, NAME, ARGS).result.success
    resp = setup.api.patch(f"/api/v1/agents/{setup.agent_id}/", {"description": "changed"}, format="json")
    assert resp.status_code == 200, resp.content
    assert principal(setup).agent.description == "changed"
    resp = setup.api.patch(f"/api/v1/agents/{setup.agent_id}/", {"tools": []}, format="json")
    assert resp.status_code == 200, resp.content
    assert service.list_functions(principal(setup)) == []
    resp = setup.api.patch(f"/api/v1/agents/{setup.agent_id}/", {"status": "DISABLED"}, format="json")
    assert resp.status_code == 200, resp.content
    with pytest.raises(service.NotFound):
        principal(setup)


def test_a_revoked_token_is_refused_on_the_next_message(setup: Any) -> None:
    from rest_framework.authtoken.models import Token

    assert principal(setup)
    Token.objects.filter(key=setup.token).delete()
    assert service.authenticate(token=setup.token, tenant_slug=setup.tenant.slug,
                                agent_id=str(setup.agent_id)) is None


def _remembering(setup: Any) -> service.Principal | None:
    from core import hotcache

    with hotcache.request_scope():  # as the gateway's worker-thread hop runs it
        return service.authenticate_remembering(token=setup.token, tenant_slug=setup.tenant.slug,
                                                agent_id=str(setup.agent_id))


def _remembered(setup: Any) -> service.Principal | None:
    return service.remembered_principal(token=setup.token, tenant_slug=setup.tenant.slug,
                                        agent_id=str(setup.agent_id))


def test_a_remembered_principal_answers_without_a_query_until_a_token_is_revoked(setup: Any) -> None:
    from rest_framework.authtoken.models import Token

    first = _remembering(setup)
    assert first is not None
    with CaptureQueriesContext(connection) as ctx:
        again = _remembered(setup)
    assert again is first and ctx.captured_queries == []
    assert service.remembered_principal(token=setup.token + "x", tenant_slug=setup.tenant.slug,
                                        agent_id=str(setup.agent_id)) is None
    Token.objects.filter(key=setup.token).delete()
    assert _remembered(setup) is None
    assert _remembering(setup) is None


def test_a_remembered_principal_is_dropped_by_a_role_change(setup: Any) -> None:
    from tenants_app.models import Membership

    assert _remembering(setup) is not None and _remembered(setup) is not None
    membership = Membership.objects.get(tenant=setup.tenant, user=setup.api.user)
    membership.role = "viewer"
    membership.save()
    assert _remembered(setup) is None
    viewer = _remembering(setup)
    assert viewer is not None and viewer.role == "viewer" and not viewer.may_call


def test_a_remembered_principal_is_dropped_when_its_agent_is_disabled(setup: Any) -> None:
    assert _remembering(setup) is not None and _remembered(setup) is not None
    resp = setup.api.patch(f"/api/v1/agents/{setup.agent_id}/", {"status": "DISABLED"}, format="json")
    assert resp.status_code == 200, resp.content
    assert _remembered(setup) is None
    with pytest.raises(service.NotFound):
        _remembering(setup)


class _CountingCache:
    """The shared cache, counting the hot cache's generation reads (one get_many each: one Redis round trip)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.reads = inner, 0

    def get_many(self, keys: Any) -> Any:
        self.reads += 1
        return self.inner.get_many(keys)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("version", ["2025-06-18", "2026-07-28"])
def test_a_message_reads_the_generations_once(setup: Any, served: Any, monkeypatch: Any, version: str) -> None:
    """Its authentication hop and its handler's hops share one read (tools/list), and a tool call adds none of
    its own; the next message reads again, so a change holds on it."""
    from django.core.cache import cache

    counting = _CountingCache(cache)
    monkeypatch.setattr("core.hotcache.cache", counting)

    async def no_sweep(self: Any) -> int:
        return 0

    # The list_changed watcher sweeps on a timer of its own; a sweep landing inside a counted message (a loaded
    # machine makes that likely) is not that message's read.
    monkeypatch.setattr("agents_app.gateway.server.ListChangedWatcher.sweep", no_sweep)
    url = served.endpoint(setup.tenant.slug, setup.agent_id)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {setup.token}", "MCP-Protocol-Version": version}
    meta: dict[str, Any] = {}
    with loopback.client(timeout=scaled(60)) as http:
        if version == "2025-06-18":
            init = http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
            assert init.status_code == 200, init.text
            headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
            http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        else:
            meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": version,
                              "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                              "io.modelcontextprotocol/clientCapabilities": {}}}

        def send(method: str, params: dict[str, Any]) -> str:
            extra = {"Mcp-Method": method, **({"Mcp-Name": params["name"]} if "name" in params else {})}
            resp = http.post(url, headers={**headers, **(extra if version != "2025-06-18" else {})},
                             json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, **meta}})
            assert resp.status_code == 200, resp.text
            return resp.text

        for _ in range(2):  # warm: the principal, the listing, the pool
            send("tools/list", {})
            send("tools/call", {"name": NAME, "arguments": ARGS})
        counting.reads = 0
        assert NAME in send("tools/list", {})
        assert counting.reads == 1
        counting.reads = 0
        assert '"isError":false' in send("tools/call", {"name": NAME, "arguments": ARGS}).replace(" ", "")
        assert counting.reads == 1
        resp = setup.api.patch(f"/api/v1/tools/{setup.tool_id}/functions/get_inventory/", {"enabled": False},
                               format="json")
        assert resp.status_code == 200, resp.content
        assert NAME not in send("tools/list", {})
