"""The Redis cache backend shares one connection pool per process (Django's builds one per request under ASGI)."""

from __future__ import annotations

import asyncio
import threading

from core.cache import SharedPoolRedisCache


def pool_of(backend: SharedPoolRedisCache) -> object:
    return backend._cache._get_connection_pool(True)


def test_backends_built_for_different_requests_share_one_pool() -> None:
    url = "redis://127.0.0.1:6379/15"
    first = SharedPoolRedisCache(url, {})
    second = SharedPoolRedisCache(url, {})
    assert first is not second and pool_of(first) is pool_of(second)
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(pool_of(SharedPoolRedisCache(url, {}))))
    thread.start()
    thread.join()

    async def in_another_context() -> object:
        return pool_of(SharedPoolRedisCache(url, {}))

    assert seen == [pool_of(first)] and asyncio.run(in_another_context()) is pool_of(first)


def test_other_servers_and_options_get_their_own_pool() -> None:
    base = SharedPoolRedisCache("redis://127.0.0.1:6379/15", {})
    assert pool_of(SharedPoolRedisCache("redis://127.0.0.1:6379/14", {})) is not pool_of(base)
    assert pool_of(SharedPoolRedisCache("redis://127.0.0.1:6379/15", {"OPTIONS": {"max_connections": 7}})) \
        is not pool_of(base)
