"""Scoped rate limits counted in two fixed windows (a sliding-window estimate), one cache round trip a request.

DRF's `ScopedRateThrottle` keeps a list of every request time in the cache: a read and a write of the whole list
(up to the rate, 600 floats for invoke) on every call, two Redis round trips and a pickle of the list. Here a
request increments the counter of the current window and reads the previous one in one pipelined round trip;
the limit applies to `previous * (share of the previous window still inside the last period) + current`, the
usual sliding-window approximation. A refused request is not counted, so a client that backs off as told by
Retry-After gets in again.

Rates and scopes are DRF's (`DEFAULT_THROTTLE_RATES`, `throttle_scope`), so views swap the class and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache import cache as default_cache
from django.core.cache.backends.redis import RedisCache
from rest_framework.throttling import ScopedRateThrottle

from core import hotcache


def _backend(cache: Any) -> Any:
    """The backend itself: `django.core.cache.cache` is a proxy, which no isinstance check sees through."""
    return caches[DEFAULT_CACHE_ALIAS] if cache is default_cache else cache


def _counts(cache: Any, current_key: str, previous_key: str, ttl: int) -> tuple[int, int]:
    """Increment the current window's counter and read the previous one: (current, previous)."""
    cache = _backend(cache)
    if isinstance(cache, RedisCache):
        current = cache.make_and_validate_key(current_key)
        previous = cache.make_and_validate_key(previous_key)
        client = cache._cache.get_client(current, write=True)
        pipe = client.pipeline(transaction=False)
        pipe.incr(current)
        pipe.expire(current, ttl)
        pipe.get(previous)
        counted, _, before = pipe.execute()
        return int(counted), int(before or 0)
    cache.add(current_key, 0, ttl)
    try:
        counted = cache.incr(current_key)
    except ValueError:  # expired between add and incr
        cache.set(current_key, 1, ttl)
        counted = 1
    return int(counted), int(cache.get(previous_key) or 0)


def _uncount(cache: Any, current_key: str) -> None:
    try:
        cache.decr(current_key)
    except ValueError:
        pass


def _seconds_until_free(limit: int, duration: int, current: int, previous: int, elapsed: float) -> float:
    """When one more request fits: the previous window's share has to fall far enough (or roll over)."""
    room = limit - 1 - current
    if room < 0 or previous == 0:
        return duration - elapsed
    # previous * (1 - t / duration) <= room  ->  t >= duration * (1 - room / previous)
    return max(0.0, duration * (1 - room / previous) - elapsed)


class _Ahead:
    """A count made before authentication, in the round trip of the request's generations read (core.hotcache):
    for the user the token named last time. The throttle takes it when the real user's key is the same;
    otherwise (another user, a refused token, no throttle check reached) it is taken back."""

    def __init__(self, cache: Any, current_key: str, previous_key: str, ttl: int) -> None:
        self.cache, self.current_key, self.previous_key, self.ttl = cache, current_key, previous_key, ttl
        self.counts: tuple[int, int] | None = None
        self.used = False

    def add(self, pipe: Any) -> None:
        cache = _backend(self.cache)
        current = cache.make_and_validate_key(self.current_key)
        pipe.incr(current)
        pipe.expire(current, self.ttl)
        pipe.get(cache.make_and_validate_key(self.previous_key))

    def took(self, results: list[Any]) -> None:
        counted, _, before = results
        self.counts = int(counted), int(before or 0)

    def take(self, current_key: str) -> tuple[int, int] | None:
        if self.counts is None or self.used or current_key != self.current_key:
            return None
        self.used = True
        return self.counts


_ahead: ContextVar[_Ahead | None] = ContextVar("toolhub_throttle_ahead", default=None)


@contextmanager
def counted_ahead(view: Any, throttles: list[Any], guess: Callable[[], Any]) -> Iterator[None]:
    """Around DRF's `initial` (authentication, permissions, throttles): when the view has a window throttle with a
    rate and `guess()` names a user (the one the request's token named last time, else None), the count rides in
    the request's first generations round trip instead of a round trip of its own; a count not taken by the
    throttle check inside (another user, a refusal before it) is taken back on the way out."""
    throttle = next((t for t in throttles if isinstance(t, ScopedWindowThrottle)), None)
    ident = guess() if throttle is not None else None
    planned = throttle.plan(view, ident) if throttle is not None and ident is not None else None
    if planned is None:
        yield
        return
    token = _ahead.set(planned)
    try:
        with hotcache.riding(planned):
            yield
    finally:
        _ahead.reset(token)
        if planned.counts is not None and not planned.used:
            _uncount(planned.cache, planned.current_key)


class ScopedWindowThrottle(ScopedRateThrottle):
    def _limits(self, view: Any) -> tuple[int, int] | None:
        # The scope comes from the view, as in ScopedRateThrottle; no scope means no limit.
        self.scope = getattr(view, self.scope_attr, None)
        if not self.scope:
            return None
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        if self.num_requests is None or self.duration is None:
            return None
        return self.num_requests, self.duration

    def plan(self, view: Any, ident: Any) -> _Ahead | None:
        """The count allow_request would make for user `ident` now, to send ahead (counted_ahead)."""
        limits = self._limits(view)
        if limits is None:
            return None
        duration = limits[1]
        key = self.cache_format % {"scope": self.scope, "ident": ident}  # get_cache_key's, for that user
        window = int(self.timer() // duration)
        return _Ahead(self.cache, f"{key}:{window}", f"{key}:{window - 1}", 2 * duration + 1)

    def allow_request(self, request: Any, view: Any) -> bool:
        limits = self._limits(view)
        if limits is None:
            return True
        limit, duration = limits
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        now = self.timer()
        window = int(now // duration)
        elapsed = now - window * duration
        current_key, previous_key = f"{self.key}:{window}", f"{self.key}:{window - 1}"
        ahead = _ahead.get()
        counts = ahead.take(current_key) if ahead is not None else None
        current, previous = counts or _counts(self.cache, current_key, previous_key, 2 * duration + 1)
        if previous * (1 - elapsed / duration) + current <= limit:
            return True
        _uncount(self.cache, current_key)
        self._wait = _seconds_until_free(limit, duration, current - 1, previous, elapsed)
        return False

    def wait(self) -> float | None:
        wait = getattr(self, "_wait", None)
        return None if wait is None else float(math.ceil(wait - 1e-9))  # 20.000000000000004 is 20


class _Scoped:
    """The view side of a throttle check made outside DRF: just the scope."""

    def __init__(self, scope: str) -> None:
        self.throttle_scope = scope


class _Caller:
    """The request side of a throttle check made outside DRF: just the authenticated user."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.META: dict[str, str] = {}


def take(scope: str, user: Any) -> float | None:
    """Count one request of `user` in `scope` outside DRF (the MCP gateway), under the same key and rate as the
    API's throttle, so both draw on one budget. None when it fits, else the seconds until one would."""
    throttle = ScopedWindowThrottle()
    if throttle.allow_request(_Caller(user), _Scoped(scope)):
        return None
    return throttle.wait() or 1.0
