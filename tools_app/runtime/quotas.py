"""Quota counters: calls per minute, per day and at once, checked and counted together, atomically.

One call is admitted against several limits at once (its tenant, member, agent and tool); either every window of
every limit has room and all are counted, or none is and the first spent one is named. Two stores share that
rule: `RedisCounters` (one Lua script, so every web process and runner sharing REDIS_URL agrees) and
`MemoryCounters` (one lock, for the embedded single-process default). Windows are fixed: the UTC minute and the
UTC day; a concurrent slot is held until the call's lease is released (and expires on its own after
`lease_ttl_s`, should the process die holding it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

MINUTE, DAY = 60, 86400
# What each limit of a quota is called in a refusal (`details.limit`).
PER_MINUTE, PER_DAY, CONCURRENT = "per_minute", "per_day", "concurrent"


@dataclass(frozen=True)
class Limit:
    """One quota as the counters see it: its scope, the key its counters live under, and its limits."""

    scope: str
    key: str
    per_minute: int | None = None
    per_day: int | None = None
    concurrent: int | None = None
    target: str = ""


@dataclass(frozen=True)
class Exceeded:
    """The first spent limit: which quota, which of its limits, its value, and when it has room again (epoch s)."""

    scope: str
    target: str
    limit: str
    allowed: int
    reset_at: float

    def retry_after(self, now: float) -> int:
        return max(1, int(self.reset_at - now + 0.999))


class Lease:
    """Concurrent slots held by one admitted call; `release` gives them back (idempotent)."""

    def __init__(self, release: Any = None) -> None:
        self._release = release
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            release, self._release = self._release, None
        if release is not None:
            release()


@dataclass(frozen=True)
class _Check:
    limit: Limit
    kind: str
    allowed: int
    key: str
    ttl_s: int
    reset_at: float


def _checks(limits: Sequence[Limit], now: float, lease_ttl_s: int) -> list[_Check]:
    minute, day = int(now // MINUTE), int(now // DAY)
    out: list[_Check] = []
    for limit in limits:
        if limit.per_minute is not None:
            out.append(_Check(limit, PER_MINUTE, limit.per_minute, f"{limit.key}:m:{minute}", 2 * MINUTE,
                              (minute + 1) * MINUTE))
        if limit.per_day is not None:
            out.append(_Check(limit, PER_DAY, limit.per_day, f"{limit.key}:d:{day}", DAY + MINUTE, (day + 1) * DAY))
        if limit.concurrent is not None:
            # No calendar reset: a slot frees when a call ends; a second is a fair guess for a retry.
            out.append(_Check(limit, CONCURRENT, limit.concurrent, f"{limit.key}:c", lease_ttl_s, now + 1))
    return out


def _exceeded(check: _Check) -> Exceeded:
    return Exceeded(scope=check.limit.scope, target=check.limit.target, limit=check.kind, allowed=check.allowed,
                    reset_at=check.reset_at)


class Counters(Protocol):
    def acquire(self, limits: Sequence[Limit], now: float | None = None) -> Lease | Exceeded: ...

    def usage(self, limit: Limit, now: float | None = None) -> dict[str, int]: ...


class MemoryCounters:
    """The in-process store: right for one process (the embedded default), wrong across several."""

    def __init__(self, lease_ttl_s: int = 3600) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[int, float]] = {}  # key -> (count, expires at)
        self._lease_ttl_s = lease_ttl_s
        self._swept = 0.0

    def _get(self, key: str, now: float) -> int:
        count, expires = self._counts.get(key, (0, 0.0))
        return count if expires > now else 0

    def acquire(self, limits: Sequence[Limit], now: float | None = None) -> Lease | Exceeded:
        now = time.time() if now is None else now
        checks = _checks(limits, now, self._lease_ttl_s)
        with self._lock:
            self._sweep(now)
            for check in checks:
                if self._get(check.key, now) + 1 > check.allowed:
                    return _exceeded(check)
            for check in checks:
                self._counts[check.key] = (self._get(check.key, now) + 1, now + check.ttl_s)
        held = [c.key for c in checks if c.kind == CONCURRENT]
        return Lease(lambda: self._release(held)) if held else Lease()

    def _release(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                count, expires = self._counts.get(key, (0, 0.0))
                if count <= 1:
                    self._counts.pop(key, None)
                else:
                    self._counts[key] = (count - 1, expires)

    def _sweep(self, now: float) -> None:
        if now - self._swept < MINUTE:
            return
        self._swept = now
        for key in [k for k, (_, expires) in self._counts.items() if expires <= now]:
            del self._counts[key]

    def usage(self, limit: Limit, now: float | None = None) -> dict[str, int]:
        now = time.time() if now is None else now
        with self._lock:
            return {c.kind: self._get(c.key, now) for c in _checks([limit], now, self._lease_ttl_s)}


# KEYS: every counter; ARGV: per key its allowed count and ttl, then how many of the keys are concurrent slots
# (the last ones). Answers 0 when all were counted, else the 1-based index of the first spent counter.
_ACQUIRE = """
for i = 1, #KEYS do
  local current = tonumber(redis.call('GET', KEYS[i]) or '0')
  if current + 1 > tonumber(ARGV[2 * i - 1]) then return i end
end
for i = 1, #KEYS do
  redis.call('INCR', KEYS[i])
  redis.call('EXPIRE', KEYS[i], tonumber(ARGV[2 * i]))
end
return 0
"""
_RELEASE = """
for i = 1, #KEYS do
  local left = redis.call('DECR', KEYS[i])
  if left <= 0 then redis.call('DEL', KEYS[i]) end
end
return 0
"""


# How many spent windows a process remembers at most (each is dropped when its window ends anyway).
SPENT_MEMO_MAX = 4096


class RedisCounters:
    """The shared store: one Lua script checks and counts every window of every limit of a call at once.

    A minute or day window found spent stays spent until it ends (its counter only grows: a refusal counts nothing),
    so this process remembers it and refuses the next calls against it without a round trip: a tenant hammering
    past its quota costs no Redis script per refused call. Concurrent slots free at any time: never remembered.
    Such a refusal names a spent limit, not necessarily the first one the script would name."""

    def __init__(self, client: Any, *, prefix: str = "toolhub:quota:", lease_ttl_s: int = 3600) -> None:
        self._client = client
        self._prefix = prefix
        self._lease_ttl_s = lease_ttl_s
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        # (counter key, allowed) -> when its window ends: a window seen spent. Keyed by the allowed count too, so a
        # quota raised since is asked again.
        self._spent: dict[tuple[str, int], float] = {}

    def _known_spent(self, checks: Sequence[_Check], now: float) -> _Check | None:
        spent = self._spent
        if not spent:
            return None
        for check in checks:
            ends = spent.get((check.key, check.allowed))
            if ends is not None and ends > now:
                return check
        return None

    def _remember_spent(self, check: _Check, now: float) -> None:
        if check.kind == CONCURRENT:
            return
        if len(self._spent) >= SPENT_MEMO_MAX:
            for key, ends in list(self._spent.items()):
                if ends <= now:
                    self._spent.pop(key, None)
            if len(self._spent) >= SPENT_MEMO_MAX:
                self._spent.clear()
        self._spent[(check.key, check.allowed)] = check.reset_at

    def acquire(self, limits: Sequence[Limit], now: float | None = None) -> Lease | Exceeded:
        now = time.time() if now is None else now
        checks = _checks(limits, now, self._lease_ttl_s)
        if not checks:
            return Lease()
        known = self._known_spent(checks, now)
        if known is not None:
            return _exceeded(known)
        keys = [self._prefix + c.key for c in checks]
        argv: list[int] = []
        for check in checks:
            argv += [check.allowed, check.ttl_s]
        spent = int(self._acquire(keys=keys, args=argv))
        if spent:
            self._remember_spent(checks[spent - 1], now)
            return _exceeded(checks[spent - 1])
        held = [self._prefix + c.key for c in checks if c.kind == CONCURRENT]
        return Lease(lambda: self._release(keys=held)) if held else Lease()

    def usage(self, limit: Limit, now: float | None = None) -> dict[str, int]:
        now = time.time() if now is None else now
        checks = _checks([limit], now, self._lease_ttl_s)
        if not checks:
            return {}
        values = self._client.mget([self._prefix + c.key for c in checks])
        return {c.kind: int(v or 0) for c, v in zip(checks, values, strict=True)}
