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
