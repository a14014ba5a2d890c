"""The gateway's hot path: a warm tools/call resolves the caller and the agent's toolset from memory and writes
only its audit row; every change that alters tools/list is seen on the next message (and by list_changed)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.gateway import service
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
