"""Quota counters (tools_app.runtime.quotas): the in-process store and, when REDIS_URL is set, the Redis one.

Parallel calls at a limit: no more than the limit are admitted, whichever store counts.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from tools_app.runtime.quotas import (
    CONCURRENT,
    PER_DAY,
    PER_MINUTE,
    Exceeded,
    Lease,
    Limit,
    MemoryCounters,
    RedisCounters,
)

REDIS_DB = 8  # this suite's own database (docs: one per test area)


def _redis_url() -> str | None:
    url = os.environ.get("REDIS_URL")
    if not url:
        return None
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{REDIS_DB}", parts.query, parts.fragment))


@pytest.fixture(params=["memory", "redis"])
def make_store(request: Any) -> Iterator[Callable[[], Any]]:
    """A factory of stores sharing one count (Redis: a client each, as separate processes would have)."""
    if request.param == "memory":
        shared = MemoryCounters()
        yield lambda: shared
        return
    url = _redis_url()
    if url is None:
        pytest.skip("REDIS_URL is not set (CI's second pass sets it)")
    import redis

    prefix = f"toolhub:quota:test:{uuid.uuid4().hex}:"
    clients: list[Any] = []

    def make() -> RedisCounters:
        client = redis.Redis.from_url(url)
        clients.append(client)
        return RedisCounters(client, prefix=prefix, lease_ttl_s=60)

    yield make
    if clients:
        for key in clients[0].scan_iter(f"{prefix}*"):
            clients[0].delete(key)
    for client in clients:
        client.close()


def test_per_minute_counts_then_refuses_naming_the_limit_and_its_reset(make_store: Any) -> None:
    store = make_store()
    limit = Limit(scope="tenant", key="t1", per_minute=2, target="")
    now = 1_000_000_050.0  # 30 s into a minute (1_000_000_020 is a minute's start)
    assert isinstance(store.acquire([limit], now), Lease)
    assert isinstance(store.acquire([limit], now), Lease)
    spent = store.acquire([limit], now)
    assert isinstance(spent, Exceeded)
    assert (spent.scope, spent.limit, spent.allowed) == ("tenant", PER_MINUTE, 2)
    assert spent.reset_at == 1_000_000_080.0 and spent.retry_after(now) == 30
    assert isinstance(store.acquire([limit], now + 30), Lease)  # the next minute


def test_per_day_resets_at_utc_midnight(make_store: Any) -> None:
    store = make_store()
    limit = Limit(scope="member", key="m1", per_day=1, target="ann")
    noon = 86400 * 20000 + 43200.0
    assert isinstance(store.acquire([limit], noon), Lease)
    spent = store.acquire([limit], noon + 3600)
    assert isinstance(spent, Exceeded) and spent.limit == PER_DAY and spent.target == "ann"
    assert spent.reset_at == 86400 * 20001


def test_all_or_nothing_across_limits(make_store: Any) -> None:
    store = make_store()
    roomy, tight = Limit(scope="tenant", key="t", per_minute=10), Limit(scope="tool", key="x", per_minute=1)
    now = 2_000_000_000.0
    assert isinstance(store.acquire([roomy, tight], now), Lease)
    spent = store.acquire([roomy, tight], now)
    assert isinstance(spent, Exceeded) and spent.scope == "tool"
    assert store.usage(roomy, now) == {PER_MINUTE: 1}  # the refused call charged nothing


def test_parallel_calls_at_a_limit_never_pass_more_than_it(make_store: Any) -> None:
    limit = Limit(scope="tenant", key="par", per_minute=10, per_day=1000)
    stores = [make_store() for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    admitted: list[int] = []
    lock = threading.Lock()

    now = 1_700_000_000.0  # one minute for all: the count, not a window boundary, is under test

    def fire(store: Any) -> None:
        barrier.wait()
        for _ in range(6):  # 48 calls at a limit of 10
            if isinstance(store.acquire([limit], now), Lease):
                with lock:
                    admitted.append(1)

    threads = [threading.Thread(target=fire, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 10
    assert stores[0].usage(limit, now) == {PER_MINUTE: 10, PER_DAY: 10}


def test_parallel_concurrent_slots_never_exceed_the_limit_and_come_back(make_store: Any) -> None:
    limit = Limit(scope="agent", key="conc", concurrent=3)
    stores = [make_store() for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    leases: list[Lease] = []
    lock = threading.Lock()

    def fire(store: Any) -> None:
        barrier.wait()
        got = store.acquire([limit])
        if isinstance(got, Lease):
            with lock:
                leases.append(got)
        else:
            assert got.limit == CONCURRENT

    threads = [threading.Thread(target=fire, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(leases) == 3
    assert stores[0].usage(limit)[CONCURRENT] == 3
    for lease in leases:
        lease.release()
        lease.release()  # twice: still one slot back
    assert stores[0].usage(limit)[CONCURRENT] == 0
    assert isinstance(stores[0].acquire([limit]), Lease)


def test_redis_store_remembers_a_spent_window_and_refuses_without_asking_until_it_ends() -> None:
    """A minute window found spent is refused from this process's memory until the minute ends (its counter only
    grows); a raised quota, the next window and concurrent slots are asked of Redis again."""
    url = _redis_url()
    if url is None:
        pytest.skip("REDIS_URL is not set (CI's second pass sets it)")
    import redis

    prefix = f"toolhub:quota:test:{uuid.uuid4().hex}:"
    client = redis.Redis.from_url(url)
    try:
        store = RedisCounters(client, prefix=prefix, lease_ttl_s=60)
        other = RedisCounters(redis.Redis.from_url(url), prefix=prefix, lease_ttl_s=60)  # another process
        limit = Limit(scope="tool", key="t9", per_minute=1, concurrent=1, target="9")
        now = 1_000_000_050.0
        lease = store.acquire([limit], now)
        assert isinstance(lease, Lease)
        lease.release()
        spent = store.acquire([limit], now)
        assert isinstance(spent, Exceeded) and spent.limit == PER_MINUTE
        # The window's counter is gone from Redis (as if it had never been counted): this store still refuses from
        # memory, with the same reset, while a store that never saw it spent asks Redis and is admitted.
        client.delete(f"{prefix}t9:m:{int(now // 60)}")
        again = store.acquire([limit], now + 5)
        assert isinstance(again, Exceeded) and (again.limit, again.reset_at) == (PER_MINUTE, spent.reset_at)
        admitted = other.acquire([limit], now + 5)
        assert isinstance(admitted, Lease)
        admitted.release()
        assert int(client.get(f"{prefix}t9:m:{int(now // 60)}") or 0) == 1  # counted by Redis, not by memory
        # A quota raised since is asked again (and has room).
        raised = Limit(scope="tool", key="t9", per_minute=5, concurrent=1, target="9")
        held = store.acquire([raised], now + 6)
        assert isinstance(held, Lease)
        # A concurrent slot refused is not remembered: once it is given back the next call is admitted.
        busy = store.acquire([raised], now + 6)
        assert isinstance(busy, Exceeded) and busy.limit == CONCURRENT
        held.release()
        freed = store.acquire([raised], now + 6)
        assert isinstance(freed, Lease)
        freed.release()
        # The next minute: asked again.
        nxt = store.acquire([limit], now + 30)
        assert isinstance(nxt, Lease)
        nxt.release()
    finally:
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
        client.close()
