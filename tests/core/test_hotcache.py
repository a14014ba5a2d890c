"""core.hotcache's keep/recall: a value kept under generations it names itself, recalled while they stand."""

from __future__ import annotations

from typing import Any

from core import hotcache


def _scopes(value: dict[str, Any]) -> tuple[str, ...]:
    return hotcache.AUTH, hotcache.tenant_scope(value["tenant"])


def test_a_kept_value_is_recalled_until_a_scope_it_names_is_bumped(db: None) -> None:
    hotcache.clear_local()
    value = {"tenant": 7, "who": "alice"}
    assert hotcache.recall("t", ("k",), _scopes) is None
    hotcache.keep("t", ("k",), _scopes(value), value, ttl=60)
    assert hotcache.recall("t", ("k",), _scopes) is value
    hotcache.bump_tenant(8)  # another tenant's change leaves it
    assert hotcache.recall("t", ("k",), _scopes) is value
    hotcache.bump_tenant(7)
    assert hotcache.recall("t", ("k",), _scopes) is None
    hotcache.keep("t", ("k",), _scopes(value), value, ttl=60)
    hotcache.bump(hotcache.AUTH)
    assert hotcache.recall("t", ("k",), _scopes) is None


def test_nothing_is_kept_without_a_lifetime_and_an_expired_value_is_not_recalled() -> None:
    hotcache.clear_local()
    value = {"tenant": 3}
    hotcache.keep("t", "zero", _scopes(value), value, ttl=0)
    assert hotcache.recall("t", "zero", _scopes) is None
    hotcache.keep("t", "short", _scopes(value), value, ttl=-1)
    assert hotcache.recall("t", "short", _scopes) is None
    hotcache.keep("t", "long", _scopes(value), value, ttl=60)
    assert hotcache.recall("t", "long", _scopes) is value
    assert hotcache.recall("other-kind", "long", _scopes) is None


def test_bulk_writes_drop_the_touched_tenants_snapshots_without_a_hand_placed_bump(db: None) -> None:
    """update(), bulk_create() and bulk_update() send no signals; the data layer bumps the tenants they touch."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agents_app.models import Agent, AgentTool
    from tests.factories import TenantFactory, ToolFactory
    from tools_app.models import Tool, ToolFunction

    mine, other = TenantFactory(), TenantFactory()
    tool, theirs = ToolFactory(tenant=mine), ToolFactory(tenant=other)
    scope, other_scope = hotcache.tenant_scope(mine.pk), hotcache.tenant_scope(other.pk)

    def changed(write: Any) -> tuple[bool, bool]:
        before = hotcache.generations(scope, other_scope)
        write()
        after = hotcache.generations(scope, other_scope)
        return before[0] != after[0], before[1] != after[1]

    assert changed(lambda: Tool.objects.filter(pk=tool.pk).update(description="x")) == (True, False)
    assert changed(lambda: Tool.objects.filter(pk=theirs.pk).update(description="x")) == (False, True)
    fn = ToolFunction.objects.create(tool=tool, name="f")
    assert changed(lambda: ToolFunction.objects.filter(pk=fn.pk).update(description="y")) == (True, False)
    fn.description = "z"
    assert changed(lambda: ToolFunction.objects.bulk_update([fn], ["description"])) == (True, False)
    agent = Agent.objects.create(tenant=other, name="a")
    assert changed(lambda: AgentTool.objects.bulk_create([AgentTool(agent=agent, tool=theirs)])) == (False, True)
    # Naming the tenant spares the query that finds it: the update is the only statement.
    with CaptureQueriesContext(connection) as ctx:
        Tool.objects.in_tenant(mine.pk).filter(pk=tool.pk).update(description="w")
    assert [q["sql"].split()[0] for q in ctx.captured_queries] == ["UPDATE"]
