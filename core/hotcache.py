"""Process-local snapshots of hot-path reads, valid while the shared generation numbers they were read under stand.

A generation is one integer per scope in the shared cache (Redis in production): `auth` for identities and
grants, `tenant:<id>` for a tenant's tools, functions, agents and links. Any change bumps its scope, now and
again after commit (a reader that re-loaded the old rows between the two sees them dropped), so every
process sharing the cache reloads on its next request. A snapshot lives in the memory of one process (never
pickled into the shared cache: a tool's snapshot holds its decrypted config) and is found only under the
very generations it was loaded at; TOOLHUB_HOT_CACHE_S bounds its life anyway, for writes that bypass the
signals. Generations start at a random number, so a cleared cache never brings back an old snapshot.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, Self, TypeVar, cast

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.cache.backends.redis import RedisCache
from django.db import transaction
from django.db.models import Model, QuerySet

T = TypeVar("T")
AUTH = "auth"
_PREFIX = "toolhub:gen:"
_MAX_ENTRIES = 4096


def tenant_scope(tenant_id: Any) -> str:
    return f"tenant:{int(tenant_id)}"


def _fresh() -> int:
    return secrets.randbits(62)


# One request reads each generation once (its token, membership, tool and grants then agree with each other);
# a bump in the same request forgets them, so the request sees its own writes.
_request_memo: ContextVar[dict[str, int] | None] = ContextVar("toolhub_hotcache_generations", default=None)


@contextmanager
def request_scope(memo: dict[str, int] | None = None, *, hints: tuple[str, ...] = ()) -> Iterator[None]:
    """Around one HTTP request or gateway message (core.logging's middleware, the gateway's ASGI app).

    `memo` shares one message's reads between the hops that serve it (the gateway's authentication and its
    handler run in different threads): a dict made for that message, never one that outlives it. A scope
    opened inside another (one tool call of a chat turn) reads afresh, and the outer scope forgets its reads
    when the inner one ends: whatever the inner one changed, the rest of the request sees. `hints` names the
    scopes the work inside will read (as `hint_tenant` does): the first read fetches them all in one round trip."""
    outer = _request_memo.get()
    token = _request_memo.set({} if memo is None else memo)
    hinted = _request_hints.set(tuple(hints))
    try:
        yield
    finally:
        _request_hints.reset(hinted)
        _request_memo.reset(token)
        if outer is not None and outer is not memo:
            outer.clear()


# Tenant slug -> id as seen by membership lookups: lets a request read its tenant's generation together with
# the identity generation, one round trip instead of two. Only a hint: a stale entry costs one unused key.
_tenant_ids: dict[str, int] = {}
_request_hints: ContextVar[tuple[str, ...]] = ContextVar("toolhub_hotcache_hints", default=())


def learn_tenant(slug: str, tenant_id: Any) -> None:
    if len(_tenant_ids) < _MAX_ENTRIES or slug in _tenant_ids:
        _tenant_ids[slug] = int(tenant_id)


def hint_tenant(slug: str | None) -> None:
    """This request will read the generation of the tenant named `slug`: fetch it with the first read."""
    tenant_id = _tenant_ids.get((slug or "").strip())
    if tenant_id is not None and _request_memo.get() is not None:
        _request_hints.set((tenant_scope(tenant_id),))


class Rider(Protocol):
    """Redis commands sent in the pipeline of a request's first generations read (core.throttle's count)."""

    def add(self, pipe: Any) -> None: ...

    def took(self, results: list[Any]) -> None: ...


_rider: ContextVar[Rider | None] = ContextVar("toolhub_hotcache_rider", default=None)


@contextmanager
def riding(rider: Rider) -> Iterator[None]:
    """While inside, this request's first generations read that goes to Redis carries `rider`'s commands in
    its round trip (once); on any other cache backend the rider is never called."""
    token = _rider.set(rider)
    try:
        yield
    finally:
        _rider.reset(token)


def _get_many(keys: list[str]) -> dict[str, Any]:
    """cache.get_many(keys), with a waiting rider's commands in the same pipeline when the cache is Redis."""
    rider = _rider.get()
    backend = caches[DEFAULT_CACHE_ALIAS]
    if rider is None or not isinstance(backend, RedisCache):
        return cast(dict[str, Any], cache.get_many(keys))
    _rider.set(None)
    made = [backend.make_and_validate_key(key) for key in keys]
    client = backend._cache.get_client(made[0], write=True)  # the throttle writes: the primary, as its own pipe
    pipe = client.pipeline(transaction=False)
    pipe.mget(made)
    rider.add(pipe)
    values, *rest = pipe.execute()
    rider.took(rest)
    loads = backend._cache._serializer.loads  # type: ignore[attr-defined]  # RedisCacheClient's own, unannotated
    return {key: loads(value) for key, value in zip(keys, values, strict=True) if value is not None}


def generations(*scopes: str) -> tuple[int, ...]:
    """The current generation of each scope, in one round trip to the shared cache (none when this request
    already read them)."""
    memo = _request_memo.get()
    wanted = [scope for scope in scopes if memo is None or scope not in memo]
    if wanted and memo is not None:
        wanted += [scope for scope in _request_hints.get() if scope not in memo and scope not in wanted]
    if wanted:
        keys = [_PREFIX + scope for scope in wanted]
        found = _get_many(keys)
        missing = [key for key in keys if key not in found]
        for key in missing:
            cache.add(key, _fresh(), timeout=None)
        if missing:
            found.update(cache.get_many(missing))
        read = {scope: int(found.get(_PREFIX + scope, 0)) for scope in wanted}
        if memo is None:
            return tuple(read[scope] for scope in scopes)
        memo.update(read)
    assert memo is not None
    return tuple(memo[scope] for scope in scopes)


def _bump_now(scopes: tuple[str, ...]) -> None:
    memo = _request_memo.get()
    if memo is not None:
        memo.clear()
    for scope in scopes:
        key = _PREFIX + scope
        try:
            cache.incr(key)
        except ValueError:
            cache.set(key, _fresh(), timeout=None)


# Called (in the writing thread) once a bump's transaction committed: who else must hear of the change (the
# gateway's subscriptions/listen streams). A hook must not raise into the write.
_on_change: list[Callable[[tuple[str, ...]], None]] = []


def on_change(hook: Callable[[tuple[str, ...]], None]) -> Callable[[], None]:
    """Register `hook(scopes)` for every committed bump; returns the call that unregisters it."""
    _on_change.append(hook)

    def unregister() -> None:
        if hook in _on_change:
            _on_change.remove(hook)

    return unregister


def _committed(scopes: tuple[str, ...]) -> None:
    _bump_now(scopes)
    for hook in list(_on_change):
        try:
            hook(scopes)
        except Exception:  # a listener's failure must not fail the write that changed things
            logging.getLogger(__name__).exception("hotcache change hook failed")


def bump(*scopes: str) -> None:
    """Drop every snapshot read under these scopes, in every process: now, and again after commit."""
    _bump_now(scopes)
    transaction.on_commit(lambda: _committed(scopes))


def bump_tenant(tenant_id: Any) -> None:
    if tenant_id is not None:
        bump(tenant_scope(tenant_id))


class _Snapshots:
    """A small LRU of (kind, key) -> (stamp, expires, value), shared by the process's threads."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, Hashable], tuple[tuple[int, ...], float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, kind: str, key: Hashable, stamp: tuple[int, ...], now: float) -> tuple[bool, Any]:
        item = self.peek(kind, key, now)
        if item is None or item[0] != stamp:
            return False, None
        return True, item[1]

    def peek(self, kind: str, key: Hashable, now: float) -> tuple[tuple[int, ...], Any] | None:
        """(stamp, value) of an unexpired entry, whatever its stamp."""
        with self._lock:
            item = self._items.get((kind, key))
            if item is None or item[1] <= now:
                return None
            self._items.move_to_end((kind, key))
            return item[0], item[2]

    def put(self, kind: str, key: Hashable, stamp: tuple[int, ...], expires: float, value: Any) -> None:
        with self._lock:
            self._items[(kind, key)] = (stamp, expires, value)
            self._items.move_to_end((kind, key))
            while len(self._items) > _MAX_ENTRIES:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_snapshots = _Snapshots()


def remembered(kind: str, key: Hashable, scopes: tuple[str, ...], load: Callable[[], T],
               *, valid_until: Callable[[T], float | None] | None = None, ttl: float | None = None) -> T:
    """`load()`'s value for (kind, key), reused while `scopes` keep the generations it was loaded under.

    `valid_until(value)` may shorten its life to a wall-clock time (time.time()) after which the value
    would answer differently without any write (a breaker's pause running out). `ttl` replaces
    TOOLHUB_HOT_CACHE_S as the longest life (0 = not kept).
    """
    ttl = float(settings.TOOLHUB_HOT_CACHE_S if ttl is None else ttl)
    if ttl <= 0:
        return load()
    stamp = generations(*scopes)
    now = time.time()
    hit, value = _snapshots.get(kind, key, stamp, now)
    if hit:
        return cast(T, value)  # what load() returned when the snapshot was taken
    value = load()
    expires = now + ttl
    if valid_until is not None:
        until = valid_until(value)
        if until is not None:
            expires = min(expires, until)
    _snapshots.put(kind, key, stamp, expires, value)
    return value


def peek(kind: str, key: Hashable) -> Any:
    """The unexpired value remembered for (kind, key) whatever generations it was loaded under, else None: a
    guess, never an answer (core.throttle counts ahead for the user it names, and takes the count back when the
    real lookup names another)."""
    item = _snapshots.peek(kind, key, time.time())
    return None if item is None else item[1]


def keep(kind: str, key: Hashable, scopes: tuple[str, ...], value: Any, *, ttl: float) -> None:
    """Store `value` for (kind, key) under the current generations of `scopes`, for recall()."""
    if ttl > 0:
        _snapshots.put(kind, key, generations(*scopes), time.time() + ttl, value)


def recall(kind: str, key: Hashable, scopes_of: Callable[[Any], tuple[str, ...]]) -> Any | None:
    """What keep() stored for (kind, key), if the scopes it rests on still have the generations it was stored
    under; None otherwise. For a caller that learns the scopes from the value itself (a remembered principal's
    tenant), so it can look without loading anything."""
    item = _snapshots.peek(kind, key, time.time())
    if item is None:
        return None
    stamp, value = item
    return value if generations(*scopes_of(value)) == stamp else None


def clear_local() -> None:
    """Forget this process's snapshots (tests; the shared generations are left alone)."""
    _snapshots.clear()


_M = TypeVar("_M", bound=Model)


class TenantBumpingQuerySet(QuerySet[_M, _M]):
    """A queryset whose signal-less writes (`update`, `bulk_create`, `bulk_update`) still drop the snapshots of
    the tenants they touch, as a save or delete does through the signals: cache invalidation lives in the data
    layer, not in a bump_tenant call each caller must remember after a bulk write.

    `tenant_path` is the lookup from a row to its tenant id (`tenant_id`, or `tool__tenant_id` for a child row).
    `update()` reads the touched tenants first (one query) unless `in_tenant(tenant_id)` named it.
    """

    tenant_path = "tenant_id"

    def in_tenant(self, tenant_id: Any) -> Self:
        """Rows of this tenant only (filtered), and the tenant to bump known without a query."""
        narrowed = self.filter(**{self.tenant_path: tenant_id})
        narrowed._known_tenants = {tenant_id}  # type: ignore[attr-defined]
        return narrowed

    def _touched(self) -> set[Any]:
        known = getattr(self, "_known_tenants", None)
        if known is not None:
            return set(known)
        return set(self.order_by().values_list(self.tenant_path, flat=True).distinct())

    def _tenant_of(self, obj: Any) -> Any:
        value = obj
        for part in self.tenant_path.split("__"):
            value = getattr(value, part, None)
            if value is None:
                return None
        return value

    def _bump(self, tenants: set[Any]) -> None:
        for tenant_id in tenants:
            bump_tenant(tenant_id)

    def _clone(self) -> Any:
        clone = super()._clone()  # type: ignore[misc]
        if hasattr(self, "_known_tenants"):
            clone._known_tenants = self._known_tenants
        return clone

    def update(self, **kwargs: Any) -> int:
        self._bump(self._touched())
        return super().update(**kwargs)

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Any]:
        created = super().bulk_create(list(objs), *args, **kwargs)
        self._bump({self._tenant_of(obj) for obj in created} - {None})
        return created

    def bulk_update(self, objs: Any, fields: Any, *args: Any, **kwargs: Any) -> int:
        objs = list(objs)
        done = super().bulk_update(objs, fields, *args, **kwargs)
        self._bump({self._tenant_of(obj) for obj in objs} - {None})
        return done
