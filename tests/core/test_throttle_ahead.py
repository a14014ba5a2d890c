"""The throttle's count sent ahead in the request's generations round trip (core.throttle.counted_ahead), through
the API: the same answers as counting after authentication, one Redis round trip fewer per throttled call.

On locmem (the first CI pass) nothing rides along and these check the plain behaviour; with REDIS_URL (the second)
they check the ridden count: taken when authentication names the guessed user, taken back when it does not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.cache.backends.redis import RedisCache
from rest_framework.authtoken.models import Token

from core.throttle import ScopedWindowThrottle
from tenants_app.models import Role
from tests.conftest import make_client
from tools_app.models import Tool, ToolType

ON_REDIS = isinstance(caches[DEFAULT_CACHE_ALIAS], RedisCache)


@pytest.fixture
def two_a_minute(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    cache.clear()
    monkeypatch.setattr(ScopedWindowThrottle, "THROTTLE_RATES", {"invoke": "2/min", "test": "2/min", "chat": "2/min"})
    yield
    cache.clear()


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Redis round trips made while the test runs: one per command sent alone, one per pipeline."""
    import redis.client

    seen: list[str] = []
    command, execute = redis.client.Redis.execute_command, redis.client.Pipeline.execute

    def counted_command(self: Any, *args: Any, **options: Any) -> Any:
        seen.append(str(args[0]))
        return command(self, *args, **options)

    def counted_execute(self: Any, raise_on_error: bool = True) -> Any:
        seen.append("pipeline:" + ",".join(str(args[0]) for args, _ in self.command_stack))
        return execute(self, raise_on_error)

    monkeypatch.setattr(redis.client.Redis, "execute_command", counted_command)
    monkeypatch.setattr(redis.client.Pipeline, "execute", counted_execute)
    return seen


def invoke(client: Any, tool: Tool) -> Any:
    return client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": tool.name, "arguments": {"path": "."}},
                       format="json")


def test_the_rate_holds_and_a_warm_invoke_makes_one_round_trip(tenant: Any, member_client: Any,
                                                                 two_a_minute: None, round_trips: list[str]) -> None:
    owner = member_client(tenant, Role.OWNER)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    assert invoke(owner, tool).status_code == 200  # the first: the token's lookup is remembered
    round_trips.clear()
    assert invoke(owner, tool).status_code == 200
    warm = list(round_trips)
    refused = invoke(owner, tool)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "throttled"
    if ON_REDIS:
        # Generations and the throttle's count in one pipeline, and nothing else sent.
        assert warm == ["pipeline:MGET,INCRBY,EXPIRE,GET"], warm


def test_a_count_for_a_refused_token_is_taken_back(tenant: Any, member_client: Any, two_a_minute: None) -> None:
    owner = member_client(tenant, Role.OWNER)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    assert invoke(owner, tool).status_code == 200  # one of two; this process now guesses the owner for the token
    Token.objects.filter(user=owner.user).delete()  # revoked: the guess still names the owner, authentication fails
    for _ in range(3):
        assert invoke(owner, tool).status_code == 401
    # Had the ridden counts of the refused requests stayed, the owner's budget would be spent.
    again = make_client(owner.user, tenant.slug)  # a new token of the same user
    assert invoke(again, tool).status_code == 200
    assert invoke(again, tool).status_code == 429


def test_a_count_guessed_for_another_user_is_taken_back(tenant: Any, member_client: Any, two_a_minute: None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tenants_app.auth_cache import CachedTokenAuthentication

    owner = member_client(tenant, Role.OWNER)
    other = member_client(tenant, Role.OWNER)
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name="list_directory")
    # Every guess names `other`: each of the owner's calls counts ahead for them and must take it back.
    monkeypatch.setattr(CachedTokenAuthentication, "likely_user_pk", lambda self, request: other.user.pk)
    assert [invoke(owner, tool).status_code for _ in range(3)] == [200, 200, 429]
    assert [invoke(other, tool).status_code for _ in range(3)] == [200, 200, 429]
