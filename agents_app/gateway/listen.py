"""`subscriptions/listen` for 2026-07-28 gateway clients: a listening client hears when what it may list changes.

Every write that changes what a tools/list answers (a link edited, a tool disabled or enabled, drift approved,
a role or grant changed) bumps the hot cache's generation of its tenant or of identities (core.hotcache);
once committed, the scopes are published on a Redis channel every web process subscribes to (in-process
with no REDIS_URL: the embedded default has one web process). Each process then recomputes, once per
listening (agent, member), the fingerprint of what tools/list would answer and tells the streams whose
listing changed; a change that leaves their listing as it was sends nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
    event_to_notification,
)

from core import hotcache

logger = logging.getLogger(__name__)
CHANNEL = "toolhub:gateway-lists"
Scopes = tuple[str, ...]


class ChangeHub:
    """This process's listen streams, told of committed changes (by hot-cache scope) on its event loop."""

    def __init__(self) -> None:
        self._listeners: dict[object, Callable[[Scopes], None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unhook: Callable[[], None] | None = None
        self._redis_stop = threading.Event()

    def __len__(self) -> int:
        return len(self._listeners)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hear changes: from Redis pub/sub when configured (every process's writes), else this process's."""
        self._loop = loop
        if settings.REDIS_URL:
            self._unhook = hotcache.on_change(_publish)
            threading.Thread(target=self._subscribe, name="toolhub-gateway-lists", daemon=True).start()
        else:
            self._unhook = hotcache.on_change(self.heard)

    def stop(self) -> None:
        if self._unhook is not None:
            self._unhook()
        self._redis_stop.set()

    def heard(self, scopes: Scopes) -> None:
        """A change (any thread): delivered to the streams on the loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._deliver, tuple(scopes))

    def _deliver(self, scopes: Scopes) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(scopes)
            except Exception:  # one stream's failure must not starve the others
                logger.exception("gateway listen stream failed to take a change")

    def subscribe(self, listener: Callable[[Scopes], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = listener
        return lambda: self._listeners.pop(token, None) and None

    def _subscribe(self) -> None:
        import redis

        while not self._redis_stop.is_set():
            try:
                client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=5, health_check_interval=30)
                pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]  # unannotated in redis
                pubsub.subscribe(CHANNEL)
                while not self._redis_stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is None:
                        continue
                    try:
                        scopes = tuple(str(s) for s in json.loads(message["data"]))
                    except (ValueError, TypeError):
                        continue
                    self.heard(scopes)
            except redis.RedisError as exc:
                # Streams miss what changed while Redis was away: clients refetch at their lists' ttlMs anyway.
                logger.warning("gateway list-change channel lost (%s); subscribing again", type(exc).__name__)
                self._redis_stop.wait(1.0)


_publishers: dict[str, Any] = {}
_publishers_lock = threading.Lock()


def _publisher(url: str) -> Any:
    """One client per Redis URL for the process: its connection pool is reused by every committed change (a new
    client per publish paid a connect and a handshake on each commit; redis-py's pool reconnects itself after a
    Redis restart and after a fork)."""
    import redis

    with _publishers_lock:
        client = _publishers.get(url)
        if client is None:
            client = _publishers[url] = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        return client


def _publish(scopes: Scopes) -> None:
    import redis

    try:
        _publisher(settings.REDIS_URL).publish(CHANNEL, json.dumps(list(scopes)))
    except redis.RedisError as exc:
        logger.warning("gateway list-change publish failed: %s", type(exc).__name__)


def _concerns(scopes: Scopes, tenant_id: int) -> bool:
    return hotcache.AUTH in scopes or hotcache.tenant_scope(tenant_id) in scopes


class ListenHandler:
    """Serves `subscriptions/listen`: acknowledges the honored filter, then sends the list-changed events the
    client asked for each time the caller's listing changes, until the client hangs up."""

    def __init__(self, hub: ChangeHub, principal_of: Callable[[ServerRequestContext[Any, Any]], Any],
                 fingerprint: Callable[[Any], Any], *, max_streams: int = 4096) -> None:
        self.hub, self.principal_of, self.fingerprint, self.max_streams = hub, principal_of, fingerprint, max_streams

    async def __call__(self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
                       ) -> types.SubscriptionsListenResult:
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        if len(self.hub) >= self.max_streams:
            raise MCPError(types.INTERNAL_ERROR, "this Toolhub process serves as many listen streams as it may; "
                                                 "retry shortly")
        principal = self.principal_of(ctx)
        wanted = params.notifications
        events: list[ServerEvent] = [
            event for flag, event in ((wanted.tools_list_changed, ToolsListChanged()),
                                      (wanted.prompts_list_changed, PromptsListChanged()),
                                      (wanted.resources_list_changed, ResourcesListChanged())) if flag]
        # Resource subscriptions are not offered: the gateway's resources are read-through, not watched.
        honored = types.SubscriptionFilter(
            tools_list_changed=True if wanted.tools_list_changed else None,
            prompts_list_changed=True if wanted.prompts_list_changed else None,
            resources_list_changed=True if wanted.resources_list_changed else None)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        wake_send, wake_recv = anyio.create_memory_object_stream[None](1)  # changes coalesce while one is checked

        def changed(scopes: Scopes) -> None:
            if _concerns(scopes, principal.tenant.pk):
                try:
                    wake_send.send_nowait(None)
                except anyio.WouldBlock:
                    pass  # a check is already due: it will see this change too

        unsubscribe = self.hub.subscribe(changed)
        try:
            seen = await self.fingerprint(principal)
            await ctx.session.send_notification(types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)),
                related_request_id=subscription_id)
            async for _ in wake_recv:
                now = await self.fingerprint(principal)
                if now == seen:
                    continue
                seen = now
                for event in events:
                    await ctx.session.send_notification(event_to_notification(event, meta),
                                                        related_request_id=subscription_id)
                if not now:  # the agent is gone or no longer the caller's: nothing left to listen to
                    break
        finally:
            unsubscribe()
            wake_send.close()
            wake_recv.close()
        return types.SubscriptionsListenResult(_meta=meta)
