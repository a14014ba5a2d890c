"""Which runner owns a server key: live runners announce themselves in Redis; rendezvous hashing picks the owner.

A runner writes `toolhub:runner:<id>` (its URL, whether it drains, how many servers it holds) with a short TTL and
renews it every few seconds. Every web process and worker computes the owner of a key from the same set of live,
non-draining runners with rendezvous (highest random weight) hashing, so they agree without a lock, and when a
runner dies or drains only the keys it owned move (on their next call); nobody else's server restarts.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import redis

PREFIX = "toolhub:runner:"


@dataclass(frozen=True)
class RunnerInfo:
    id: str
    url: str
    draining: bool = False
    servers: int = 0
    since: float = 0.0


def owner(key: str, runners: list[RunnerInfo]) -> RunnerInfo | None:
    """The runner that owns `key` among `runners` (draining ones only when nothing else is left)."""
    live = [r for r in runners if not r.draining] or []
    if not live:
        return None
    return max(live, key=lambda r: hashlib.sha256(f"{r.id}\x00{key}".encode()).digest())


class Registry:
    """Runner heartbeats in Redis."""

    def __init__(self, url: str, *, ttl_s: float = 10.0) -> None:
        self.redis = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self.ttl_s = ttl_s
        self._cache: tuple[float, list[RunnerInfo]] = (0.0, [])

    def announce(self, info: RunnerInfo) -> None:
        self.redis.set(PREFIX + info.id, json.dumps(info.__dict__), px=int(self.ttl_s * 1000))

    def withdraw(self, runner_id: str) -> None:
        self.redis.delete(PREFIX + runner_id)

    def set_draining(self, runner_id: str) -> bool:
        """Mark a runner draining (its servers move on their next call); False when no such runner is live."""
        raw = self.redis.get(PREFIX + runner_id)
        if raw is None:
            return False
        info = RunnerInfo(**{**json.loads(raw), "draining": True})
        self.redis.set(PREFIX + runner_id + ":drain", "1")
        self.announce(info)
        return True

    def draining(self, runner_id: str) -> bool:
        return bool(self.redis.exists(PREFIX + runner_id + ":drain"))

    def runners(self, *, max_age_s: float = 1.0) -> list[RunnerInfo]:
        """The live runners (read at most once per `max_age_s`: calls do not each pay a Redis scan)."""
        at, cached = self._cache
        now = time.monotonic()
        if now - at < max_age_s:
            return cached
        found = []
        for key in self.redis.scan_iter(match=PREFIX + "*", count=100):
            name = key.decode()
            if name.endswith(":drain"):
                continue
            raw = self.redis.get(key)
            if raw is not None:
                found.append(RunnerInfo(**json.loads(raw)))
        found.sort(key=lambda r: r.id)
        self._cache = (now, found)
        return found

    def forget(self) -> None:
        """Drop the cached list (a runner just failed: read the truth on the next lookup)."""
        self._cache = (0.0, [])

    def describe(self) -> list[dict[str, Any]]:
        return [r.__dict__ for r in self.runners(max_age_s=0)]
