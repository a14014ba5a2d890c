"""Streamable-HTTP sessions in shared storage: any Toolhub process answers a session another one opened.

The SDK keeps a session in the memory of the process that answered `initialize`. What a session needs
beyond that handshake is small (who owns it, the negotiated version, the client's declared
capabilities), so the gateway records it in the Django cache (Redis in production) and a process that
meets an unknown session id adopts it: a fresh transport under the same id, its connection born
initialized from the record. Requests, tools/list, tools/call and the GET stream for list_changed then
work on every process. What cannot move is a server-to-client request in flight (an elicitation): its
answer must reach the process that asked, so behind a balancer that is not sticky on Mcp-Session-Id an
elicitation may time out, and the call then answers with its pending approval id.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any
from uuid import uuid4

import anyio
from anyio.abc import TaskStatus
from django.conf import settings
from django.core.cache import cache
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import InitializeRequestParams
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Receive, Scope, Send

from agents_app.gateway.transport import FastAnswers, LateCommitTransport, handle_modern

logger = logging.getLogger(__name__)

KEY = "toolhub:mcp-session:{}"
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")


def _key(session_id: str) -> str:
    return KEY.format(session_id[:64])


def _ttl() -> int:
    return int(settings.TOOLHUB_MCP_SESSION_IDLE_S) + 60


# The records of the sessions this process serves, so they can be written again after Redis lost them
# (a restart without persistence): otherwise a session would answer only on the process holding it.
_served: dict[str, dict[str, Any]] = {}


# The SDK connection of each live session this process serves, by session id, as its last request through the SDK's
# server saw it (negotiated version, the client's declared capabilities): what the fast path answers a warm call of
# that session with (agents_app.gateway.fastcall). Weak: a session that ends drops out.
_connections: weakref.WeakValueDictionary[str, Connection] = weakref.WeakValueDictionary()


def note_connection(connection: Any) -> None:
    session_id = getattr(connection, "session_id", None)
    if session_id and isinstance(connection, Connection) and _connections.get(session_id) is not connection:
        _connections[session_id] = connection


def connection_of(session_id: str) -> Connection | None:
    return _connections.get(session_id)


def now() -> float:
    return time.time()


def remember(*, session_id: str, owner: dict[str, Any], protocol_version: str, client_params: Any,
             counted: tuple[str, ...] = ()) -> None:
    """Record a session at its handshake (called from the initialize middleware); `counted` names the caps
    (per token, per member) it counts under."""
    record = {"owner": dict(owner), "protocol_version": protocol_version, "client_params": client_params,
              "caps": list(counted)}
    _served[session_id] = record
    cache.set(_key(session_id), record, timeout=_ttl())
    at = now()
    _touched[session_id] = at
    for cap in counted:
        _note_use(cap, session_id, at)


# --- caps on open sessions ---------------------------------------------------------------------------------
#
# Each cap (a token's, a member's) keeps one index in the cache: session id -> when it was last used. A session
# counts while its record stands and it was used within TOOLHUB_MCP_SESSION_IDLE_S; at the cap the least
# recently used one is closed to make room (agents_app.gateway.asgi), so clients that reconnect without
# ending their old sessions, or whose worker died, are never locked out: what they abandoned is closed first.
# A process notes a session's use at most once per TOOLHUB_MCP_SESSION_TOUCH_S (the index is one cache value).

INDEX = "toolhub:mcp-sessions:{}"
CLOSED = "toolhub:mcp-session-closed:{}"
_touched: dict[str, float] = {}  # session id -> when this process last noted its use


def _index(cap: str) -> str:
    return INDEX.format(cap)


def _idle_s() -> float:
    return float(settings.TOOLHUB_MCP_SESSION_IDLE_S)


def caps(*, token_digest: str, tenant_id: int, user_id: int) -> dict[str, str]:
    """The caps a new session counts under: its token's, and its member's (the user in this tenant)."""
    return {"token": f"token:{token_digest}", "member": f"member:{tenant_id}:{user_id}"}


def cap_limits() -> dict[str, int]:
    return {"token": int(settings.TOOLHUB_MCP_MAX_SESSIONS_PER_TOKEN),
            "member": int(settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER)}


def _note_use(cap: str, session_id: str, at: float) -> None:
    index = _index(cap)
    listed = dict(cache.get(index) or {})
    listed[session_id] = at
    cache.set(index, listed, timeout=_ttl())


def open_sessions(cap: str) -> list[tuple[str, float]]:
    """The sessions counting under `cap`, least recently used first: their record stands (an ended session's is
    deleted) and they were used within the idle expiry. The index drops the others as it goes.

    Two processes admitting at the same instant may each miss the other's newest session (the index is one
    cache value, not a transaction): a cap can be passed by the number of processes, never more."""
    index = _index(cap)
    listed: dict[str, float] = dict(cache.get(index) or {})
    if not listed:
        return []
    alive = set(cache.get_many([_key(sid) for sid in listed]))
    fresh_after = now() - _idle_s()
    kept = {sid: at for sid, at in listed.items() if _key(sid) in alive and at > fresh_after}
    if len(kept) != len(listed):
        cache.set(index, kept, timeout=_ttl())
    return sorted(kept.items(), key=lambda item: item[1])


def open_count(cap: str) -> int:
    return len(open_sessions(cap))


def touched_lately(session_id: str) -> bool:
    """This process noted the session's use within TOOLHUB_MCP_SESSION_TOUCH_S: `touch` has nothing to do. A
    memory read, so the event loop asks it first and a warm request makes no thread hop for its session."""
    last = _touched.get(session_id)
    return last is not None and now() - last < float(settings.TOOLHUB_MCP_SESSION_TOUCH_S)


def touch(session_id: str, counted: dict[str, str]) -> bool:
    """Note that a session was used (at most once per TOOLHUB_MCP_SESSION_TOUCH_S per process). False when it
    was closed by another process since (to make room under a cap): the caller ends it here too."""
    if touched_lately(session_id):
        return True
    at = now()
    _touched[session_id] = at
    if cache.get(CLOSED.format(session_id[:64])):
        return False
    if not cache.touch(_key(session_id), timeout=_ttl()):
        record = _served.get(session_id)
        if record is not None:  # the cache lost it (a Redis restart): write it again
            cache.add(_key(session_id), record, timeout=_ttl())
    for cap in counted.values():
        _note_use(cap, session_id, at)
    return True


def close(session_id: str) -> None:
    """Close a session everywhere: it leaves the caps' indexes, its record goes (no process adopts it), and a
    mark tells the process serving it to end it at its next request."""
    cache.set(CLOSED.format(session_id[:64]), True, timeout=_ttl())
    forget(session_id)


def record_again(live: set[str]) -> int:
    """After a Redis restart: write the record of every session this process still serves (`live`) that the
    cache no longer holds (an ended session leaves `_served` when its manager discards it). Returns how many
    were written."""
    written = 0
    for session_id, record in list(_served.items()):
        if session_id in live and cache.add(_key(session_id), record, timeout=_ttl()):
            written += 1
    return written


def recall(session_id: str) -> dict[str, Any] | None:
    record = cache.get(_key(session_id))
    if isinstance(record, dict):
        cache.touch(_key(session_id), timeout=_ttl())
        return record
    return None


def forget(session_id: str, counted: tuple[str, ...] | None = None) -> None:
    """The session ended (DELETE, closed to make room): its record goes and it counts under no cap any more."""
    if counted is None:
        record = cache.get(_key(session_id))
        counted = tuple(record.get("caps") or ()) if isinstance(record, dict) else ()
    cache.delete(_key(session_id))
    _served.pop(session_id, None)
    _touched.pop(session_id, None)
    for cap in counted:
        index = _index(cap)
        listed = dict(cache.get(index) or {})
        if listed.pop(session_id, None) is not None:
            cache.set(index, listed, timeout=_ttl())


class SharedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, plus adoption of sessions opened by another process, and transports that
    answer a request with plain JSON when they have nothing to stream (agents_app.gateway.transport)."""

    fast: FastAnswers | None = None  # the warm tools/call fast path (gateway.fastcall), set by the gateway app

    def _transport(self, session_id: str) -> StreamableHTTPServerTransport:
        transport = LateCommitTransport(
            mcp_session_id=session_id, is_json_response_enabled=self.json_response, event_store=self.event_store,
            security_settings=self.security_settings, retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )
        transport.fast = self.fast
        return transport

    async def _handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A 2026-07-28 request (a version header outside the handshake era, as the SDK routes it): its entry, with
        # a request that has nothing to stream answered without the stream's task group (gateway.transport).
        version = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == _VERSION_HEADER), None)
        if self._task_group is not None and version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await handle_modern(self.app, self.security_settings, self.json_response, self._lifespan_state, scope,
                                receive, send, fast=self.fast)
            return
        await super()._handle_request(scope, receive, send)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # The SDK's admission, with this module's transport.
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        transport = self._transport(uuid4().hex)
        session_id = transport.mcp_session_id
        assert session_id is not None
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = next((v.decode("latin-1") for k, v in scope.get("headers", [])
                           if k == MCP_SESSION_ID_HEADER.encode()), None)
        if session_id and session_id not in self._server_instances:
            await self._adopt(session_id, scope)
        serving = self._server_instances.get(session_id) if session_id else None
        await super()._handle_stateful_request(scope, receive, send)
        # DELETE releases its place under the caps (the transport is terminated at once; the manager may forget
        # it a moment later).
        if session_id and scope.get("method") == "DELETE" and (
                session_id not in self._server_instances or (serving is not None and serving.is_terminated)):
            await anyio.to_thread.run_sync(forget, session_id)

    def live_sessions(self) -> set[str]:
        return set(list(self._server_instances))

    async def end(self, session_id: str) -> None:
        """End a session this process serves (closed elsewhere, or to make room under a cap); a later request
        naming it is answered "session not found", on which a client opens a new one."""
        transport = self._server_instances.get(session_id)
        if transport is not None:
            await self._discard_session(session_id, transport)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        _served.pop(session_id, None)
        _touched.pop(session_id, None)
        _connections.pop(session_id, None)
        await super()._discard_session(session_id, transport)

    async def _adopt(self, session_id: str, scope: Scope) -> None:
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            return
        record = await anyio.to_thread.run_sync(recall, session_id)
        # Only the credential (and agent) that opened the session may continue it; anything else is
        # left to the SDK, which answers "session not found".
        if record is None or record.get("owner") != dict(authorization_context(user)):
            return
        try:
            params = InitializeRequestParams.model_validate(record.get("client_params") or {}, by_name=False)
        except ValueError:
            return
        async with self._session_creation_lock:
            if session_id in self._server_instances:
                return
            if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
                return
            transport = self._transport(session_id)
            self._server_instances[session_id] = transport
            self._session_owners[session_id] = authorization_context(user)
        version = str(record.get("protocol_version") or params.protocol_version)
        _served[session_id] = record

        async def run_adopted(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with transport.connect() as (read_stream, write_stream):
                task_status.started()
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read_stream, write_stream, inline_methods=frozenset({"initialize"}))
                connection = Connection.for_loop(dispatcher, session_id=session_id, protocol_version_hint=version)
                connection.client_params = params
                connection.protocol_version = version
                connection.initialized.set()
                idle_scope = transport.idle_scope or anyio.CancelScope()
                try:
                    with idle_scope:
                        await serve_connection(self.app, dispatcher, connection=connection,
                                               lifespan_state=self._lifespan_state)
                except Exception:
                    logger.exception("adopted MCP session %s crashed", session_id[:64])
                finally:
                    await self._discard_session(session_id, transport)

        assert self._task_group is not None
        await self._task_group.start(run_adopted)
        logger.info("adopted MCP session %s opened by another process", session_id[:64])
