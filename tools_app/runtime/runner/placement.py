"""Which runner owns a server key: live runners announce themselves in Redis; rendezvous hashing picks the owner.

A runner writes `toolhub:runner:<id>` (its URL, whether it drains, how many servers it holds) with a short TTL and
renews it every few seconds. Every web process and worker computes the owner of a key from the same set of live,
non-draining runners with rendezvous (highest random weight) hashing, so they agree without a lock, and when a
runner dies or drains only the keys it owned move (on their next call); nobody else's server restarts.

Redis is not trusted to say who a runner is. Each announcement is signed with the runner secret (HMAC-SHA256 over
the runner's id, URL, draining flag and an expiry time), and so is a draining mark (bound to the runner's id and
start time). A reader takes only announcements whose signature holds and whose expiry has not passed; anything else
(written by whoever reached Redis without the secret) is ignored, counted in `Registry.rejected` and logged with its
key. A forged entry that overwrites a real runner's key does not evict it either: the last verified announcement of
that runner stays in use until its own signed expiry. So calls, and the secret in their `Authorization` header, only
ever go to a URL a holder of the secret announced.

Redis only carries the announcements; their signature and expiry say how long each holds. So a reader keeps using a
verified announcement until its signed expiry when Redis cannot be reached (a restart) or no longer holds the key (a
restarted Redis comes back empty, before the runner's next heartbeat): LOCAL calls go on through a Redis restart
instead of failing with "no runner" until every runner has announced itself again. What takes a runner out before
its expiry is its signed withdrawal (written when it stops), a draining announcement, or its refused connection.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

PREFIX = "toolhub:runner:"
DRAIN_SUFFIX = ":drain"
log = logging.getLogger("toolhub.runner")
# Redis away (restarting): the reader goes on with what it verified, the heartbeat tries again soon.
REDIS_DOWN = (redis.ConnectionError, redis.TimeoutError)


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


def _mac(secret: str, *parts: str) -> str:
    return hmac.new(secret.encode(), "\x00".join(parts).encode(), hashlib.sha256).hexdigest()


def announcement_mac(secret: str, info: RunnerInfo, expires: float) -> str:
    """The signature of one announcement: what decides where calls go (id, URL, draining, start, expiry)."""
    return _mac(secret, "announce", info.id, info.url, "1" if info.draining else "0", repr(float(info.since)),
                repr(float(expires)))


def withdrawal_mac(secret: str, runner_id: str, at: float) -> str:
    """The signature of a withdrawal: every announcement of `runner_id` that started before `at` is void."""
    return _mac(secret, "withdraw", runner_id, repr(float(at)))


def drain_mac(secret: str, runner_id: str, since: float) -> str:
    """The signature of a draining mark for one run of one runner (a new start is not drained by an old mark)."""
    return _mac(secret, "drain", runner_id, repr(float(since)))


class Registry:
    """Runner heartbeats in Redis, signed with the runner secret and checked on every read."""

    def __init__(self, url: str, *, ttl_s: float = 10.0, secret: str) -> None:
        if not secret:
            raise ValueError("the runner registry needs TOOLHUB_RUNNER_SECRET: announcements are signed with it")
        # One immediate retry (a connection a Redis restart closed reconnects), no backoff: redis-py's default
        # (10 retries with backoff) held each lookup for seconds while Redis was down, where the verified list does.
        self.redis = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2, retry=Retry(NoBackoff(), 1))
        self.ttl_s = ttl_s
        self._secret = secret
        self._cache: tuple[float, list[RunnerInfo]] = (0.0, [])
        # The last verified announcement of each runner and its signed expiry: a forged overwrite does not evict it.
        self._verified: dict[str, tuple[RunnerInfo, float]] = {}
        self.rejected = 0  # announcements and draining marks refused since start (forged, unsigned, expired)
        self.redis_down = False  # the last read found Redis unreachable

    def announce(self, info: RunnerInfo) -> None:
        expires = time.time() + self.ttl_s
        signed = {"info": asdict(info), "expires": expires, "sig": announcement_mac(self._secret, info, expires)}
        self.redis.set(PREFIX + info.id, json.dumps(signed), px=int(self.ttl_s * 1000))

    def withdraw(self, runner_id: str) -> None:
        """A signed withdrawal in place of the announcement (a missing key is not one: Redis may have lost it)."""
        at = time.time()
        signed = {"withdrawn": {"id": runner_id, "at": at}, "sig": withdrawal_mac(self._secret, runner_id, at)}
        self.redis.set(PREFIX + runner_id, json.dumps(signed), px=int(self.ttl_s * 1000))
        self.redis.delete(PREFIX + runner_id + DRAIN_SUFFIX)

    def set_draining(self, runner_id: str) -> bool:
        """Mark a runner draining (its servers move on their next call); False when no such runner is live."""
        info = self._read(PREFIX + runner_id)
        if info is None:
            return False
        self.redis.set(PREFIX + runner_id + DRAIN_SUFFIX,
                       json.dumps({"since": info.since, "sig": drain_mac(self._secret, runner_id, info.since)}))
        self.announce(RunnerInfo(**{**asdict(info), "draining": True}))
        return True

    def draining(self, runner_id: str, since: float) -> bool:
        """Whether the run of `runner_id` that started at `since` was marked draining by a holder of the secret."""
        key = PREFIX + runner_id + DRAIN_SUFFIX
        raw = self.redis.get(key)
        if raw is None:
            return False
        try:
            mark = json.loads(raw)
            valid = float(mark["since"]) == float(since) and hmac.compare_digest(
                str(mark["sig"]), drain_mac(self._secret, runner_id, since))
        except (ValueError, TypeError, KeyError):
            valid = False
        if not valid:
            self._reject(key, "draining mark without a valid signature for this runner")
        return valid

    def runners(self, *, max_age_s: float = 1.0) -> list[RunnerInfo]:
        """The live, verified runners (read at most once per `max_age_s`: calls do not each pay a Redis scan).

        Redis unreachable: the runners verified before, until their signed expiry (logged once per outage)."""
        at, cached = self._cache
        now = time.monotonic()
        if now - at < max_age_s:
            return cached
        try:
            for key in self.redis.scan_iter(match=PREFIX + "*", count=100):
                name = key.decode()
                if not name.endswith(DRAIN_SUFFIX):
                    self._read(name)
        except REDIS_DOWN as exc:
            if not self.redis_down:
                log.warning("runner registry: Redis unreachable (%s); calls go on to the runners verified before, "
                            "until their announcements expire", type(exc).__name__,
                            extra={"event": "runner_registry_redis_down"})
            self.redis_down = True
        else:
            self.redis_down = False
        wall = time.time()
        for runner_id, (_, expires) in list(self._verified.items()):
            if expires < wall:  # its signature has lapsed (a missing key alone is not a withdrawal: see the module)
                del self._verified[runner_id]
        found = sorted((info for info, _ in self._verified.values()), key=lambda r: r.id)
        self._cache = (now, found)
        return found

    def _read(self, key: str) -> RunnerInfo | None:
        """The verified announcement at `key` (remembered), or None (nothing there, or refused and logged)."""
        raw = self.redis.get(key)
        if raw is None:
            return None
        try:
            signed = json.loads(raw)
            if "withdrawn" in signed:
                self._withdrawn(key, signed)
                return None
            info = RunnerInfo(**signed["info"])
            expires = float(signed["expires"])
            valid = (info.id == key[len(PREFIX):]
                     and hmac.compare_digest(str(signed["sig"]), announcement_mac(self._secret, info, expires)))
        except (ValueError, TypeError, KeyError, AttributeError):
            valid = False
        if not valid:
            self._reject(key, "runner announcement without a valid signature")
            return None
        if expires < time.time():
            self._reject(key, "runner announcement past its signed expiry")
            return None
        self._verified[info.id] = (info, expires)
        return info

    def _withdrawn(self, key: str, signed: dict[str, Any]) -> None:
        """A withdrawal at `key`: forget the runner's announcements from before it, if a holder of the secret wrote it."""
        runner_id = key[len(PREFIX):]
        at = float(signed["withdrawn"]["at"])
        if signed["withdrawn"].get("id") != runner_id or not hmac.compare_digest(
                str(signed["sig"]), withdrawal_mac(self._secret, runner_id, at)):
            self._reject(key, "runner withdrawal without a valid signature")
            return
        known = self._verified.get(runner_id)
        if known is not None and known[0].since <= at:
            del self._verified[runner_id]

    def _reject(self, key: str, why: str) -> None:
        self.rejected += 1
        log.warning("ignored %s at Redis key %s (not written by a holder of TOOLHUB_RUNNER_SECRET)", why, key,
                    extra={"event": "runner_announcement_rejected", "redis_key": key})

    def forget(self) -> None:
        """Drop the cached list (a runner just failed: read the truth on the next lookup)."""
        self._cache = (0.0, [])

    def describe(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.runners(max_age_s=0)]
