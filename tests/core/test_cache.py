"""The Redis cache backend shares one connection pool per process (Django's builds one per request under ASGI)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading

import pytest

from core.cache import SharedPoolRedisCache
from tests.fixtures.mcp_servers import free_port, wait_listening


def pool_of(backend: SharedPoolRedisCache) -> object:
    return backend._cache._get_connection_pool(True)  # type: ignore[attr-defined]  # private: not in django-stubs


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


def _redis_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc=proc)
    return proc


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_the_shared_pool_reconnects_by_itself_after_redis_restarts() -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    port = free_port()  # a server of this test's own: the shared Redis is never restarted by a test
    server = _redis_server(port)
    try:
        backend = SharedPoolRedisCache(f"redis://127.0.0.1:{port}/0", {})
        backend.set("k", 1)
        assert backend.get("k") == 1
        server.kill()
        server.wait(10)
        with pytest.raises(RedisConnectionError):  # mapped to 503 service_unavailable (core.exceptions)
            backend.get("k")
        server = _redis_server(port)
        # The pool's connections died with the old server; the next command reconnects without a restart
        # of the process (the data went with the old server: --save "").
        assert backend.get("k") is None
        backend.set("k", 2)
        assert SharedPoolRedisCache(f"redis://127.0.0.1:{port}/0", {}).get("k") == 2
    finally:
        server.kill()
        server.wait(10)


def test_one_client_per_pool_and_it_works() -> None:
    url = "redis://127.0.0.1:6379/15"
    first, second = SharedPoolRedisCache(url, {}), SharedPoolRedisCache(url, {})
    client = first._cache.get_client(write=True)
    assert second._cache.get_client(write=False) is client
    assert client.connection_pool is pool_of(first)
    first.set("toolhub-test-shared-client", 41)
    assert second.incr("toolhub-test-shared-client") == 42
    first.delete("toolhub-test-shared-client")


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_clear_with_a_key_prefix_deletes_only_that_prefix() -> None:
    """Parallel test processes share one Redis database, each caching under its own prefix (config/settings/test.py):
    one's cache clear before each test must leave the others' keys (and whatever else the database holds) alone."""
    port = free_port()  # a server of this test's own: a clear without a prefix is FLUSHDB
    server = _redis_server(port)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        mine, other = (SharedPoolRedisCache(url, {"KEY_PREFIX": prefix}) for prefix in ("gw[1]", "gw11"))
        unprefixed = SharedPoolRedisCache(url, {})
        for n in range(1200):  # more than one SCAN page and one DELETE batch
            mine.set(f"k{n}", n)
        other.set("k1", "theirs")
        unprefixed.set("plain", "kept")
        raw = mine._cache.get_client(write=True)
        raw.set("celery-task-meta-x", "kept")
        mine.clear()
        assert mine.get("k1") is None and mine.get("k1199") is None
        assert other.get("k1") == "theirs" and unprefixed.get("plain") == "kept" and raw.get("celery-task-meta-x")
        unprefixed.clear()  # no prefix: Django's own clear, the whole database
        assert other.get("k1") is None and raw.dbsize() == 0
    finally:
        server.kill()
        server.wait(10)
