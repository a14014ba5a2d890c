"""Django's Redis cache with one connection pool per process, not one per request.

Django keeps cache backends in a context-local (not thread-critical) store, so under ASGI every request
builds a new backend, a new redis-py pool and a new TCP connection with its handshake: about a millisecond
and three round trips per request before the first cache read. Pools here are shared by URL and options
across the process (redis-py pools are thread-safe and reset themselves in a forked child), and so is the
redis-py client over each pool: Django builds a new one for every cache call (a tenth of a millisecond or more
of Python per call, several calls per request); a client holds no connection of its own and is thread-safe.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.base import default_key_func
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

_pools: dict[tuple[str, str], Any] = {}
_clients: dict[int, Any] = {}  # id(pool) -> client; pools live as long as the process, so ids stay theirs
_lock = threading.Lock()


class _SharedPoolClient(RedisCacheClient):
    def _get_connection_pool(self, write: bool) -> Any:
        client: Any = self  # the stubs do not declare RedisCacheClient's private attributes
        index = client._get_connection_pool_index(write)
        server = client._servers[index]
        key = (server, repr(sorted(client._pool_options.items())))
        pool = _pools.get(key)
        if pool is None:
            with _lock:
                pool = _pools.get(key)
                if pool is None:
                    pool = _pools[key] = client._pool_class.from_url(server, **client._pool_options)
        return pool

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        client = _clients.get(id(pool))
        if client is None:
            with _lock:
                client = _clients.setdefault(id(pool), self._client(connection_pool=pool))  # type: ignore[attr-defined]
        return client


class SharedPoolRedisCache(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _SharedPoolClient

    def clear(self) -> None:
        """Django's clear() empties the whole Redis database (FLUSHDB). With a KEY_PREFIX, only this cache's keys
        go: the database may hold other caches' keys (parallel test processes sharing one Redis, each under its
        own prefix) and what else lives there (quota counters, Celery results)."""
        if not self.key_prefix or self.key_func is not default_key_func:  # keys of another form: all go
            super().clear()
            return
        client = self._cache.get_client(write=True)
        pattern = "".join(f"\\{c}" if c in "*?[]\\" else c for c in self.key_prefix) + ":*"  # make_key's form
        batch: list[Any] = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 500:
                client.delete(*batch)
                batch.clear()
        if batch:
            client.delete(*batch)
