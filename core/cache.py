"""Django's Redis cache with one connection pool per process, not one per request.

Django keeps cache backends in a context-local (not thread-critical) store, so under ASGI every request
builds a new backend, a new redis-py pool and a new TCP connection with its handshake: about a millisecond
and three round trips per request before the first cache read. Pools here are shared by URL and options
across the process (redis-py pools are thread-safe and reset themselves in a forked child).
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

_pools: dict[tuple[str, str], Any] = {}
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


class SharedPoolRedisCache(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _SharedPoolClient
