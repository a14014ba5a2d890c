"""Cross-process pool release: a config change, disable or delete made in one process closes the tool's
pooled sessions (and ends its server processes) in every other process sharing Redis, at once.

Without REDIS_URL there is one web process (plus the embedded worker, which only probes), so nothing is sent.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

from django.conf import settings

logger = logging.getLogger(__name__)
CHANNEL = "toolhub:tool-release"
_ME = uuid.uuid4().hex
_started = False
_lock = threading.Lock()
_on_reconnect: list[Callable[[], None]] = []


def on_reconnect(callback: Callable[[], None]) -> None:
    """Call `callback` (in the listener's thread) each time the listener is subscribed again after losing
    Redis: state kept only in Redis may be gone (a restart without persistence) and can be written again."""
    _on_reconnect.append(callback)


def _reconnected() -> None:
    for callback in list(_on_reconnect):
        try:
            callback()
        except Exception:  # one failing hook must not stop the listener or the others
            logger.exception("after a Redis reconnect: %r failed", callback)


def publish_release(tool_id: int) -> None:
    """Tell every other process to close its sessions of `tool_id` (after commit; best effort, logged)."""
    if not settings.REDIS_URL:
        return
    import redis

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        client.publish(CHANNEL, f"{_ME}:{int(tool_id)}")
        client.close()
    except redis.RedisError as exc:
        # The other processes still never use the old session: the pool keys sessions by config_version
        # and calls check the tool's status first; they only keep it until the idle TTL.
        logger.warning("pool release broadcast failed for tool %s: %s", tool_id, type(exc).__name__)


def start_listener(release: Callable[[int], None]) -> None:
    """Once per process: a daemon thread applying other processes' releases to this process's pool."""
    global _started
    if not settings.REDIS_URL:
        return
    with _lock:
        if _started:
            return
        _started = True
    threading.Thread(target=_listen, args=(release,), name="toolhub-pool-release", daemon=True).start()


def _listen(release: Callable[[int], None]) -> None:
    import time

    import redis

    lost = False
    while True:
        try:
            client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=5, health_check_interval=30)
            pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]  # unannotated in redis
            pubsub.subscribe(CHANNEL)
            if lost:
                lost = False
                _reconnected()
            for message in pubsub.listen():
                sender, _, tool = str(message.get("data", b""), "utf-8", "replace").partition(":")
                if sender != _ME and tool.isdigit():
                    release(int(tool))
        except redis.RedisError as exc:  # Redis restarted: resubscribe
            lost = True
            logger.warning("pool release listener reconnecting: %s", type(exc).__name__)
            time.sleep(1)
