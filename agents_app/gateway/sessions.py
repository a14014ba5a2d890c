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
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import InitializeRequestParams
from starlette.types import Receive, Scope, Send

from agents_app.gateway.transport import LateCommitTransport

logger = logging.getLogger(__name__)

KEY = "toolhub:mcp-session:{}"


def _key(session_id: str) -> str:
    return KEY.format(session_id[:64])


def _ttl() -> int:
    return int(settings.TOOLHUB_MCP_SESSION_IDLE_S) + 60


# The records of the sessions this process serves, so they can be written again after Redis lost them
# (a restart without persistence): otherwise a session would answer only on the process holding it.
_served: dict[str, dict[str, Any]] = {}


def remember(*, session_id: str, owner: dict[str, Any], protocol_version: str, client_params: Any,
             counted: tuple[str, ...] = ()) -> None:
    """Record a session at its handshake (called from the initialize middleware); `counted` names the caps
    (per token, per member) it counts under."""
    record = {"owner": dict(owner), "protocol_version": protocol_version, "client_params": client_params}
    _served[session_id] = record
    cache.set(_key(session_id), record, timeout=_ttl())
    for cap in counted:
        index = _index(cap)
        listed = [sid for sid in cache.get(index) or [] if sid != session_id]
        cache.set(index, [*listed, session_id], timeout=_ttl())


# --- caps on open sessions ---------------------------------------------------------------------------------

INDEX = "toolhub:mcp-sessions:{}"


def _index(cap: str) -> str:
    return INDEX.format(cap)


def caps(*, token_digest: str, tenant_id: int, user_id: int) -> dict[str, str]:
    """The caps a new session counts under: its token's, and its member's (the user in this tenant)."""
    return {"token": f"token:{token_digest}", "member": f"member:{tenant_id}:{user_id}"}


def cap_limits() -> dict[str, int]:
    return {"token": int(settings.TOOLHUB_MCP_MAX_SESSIONS_PER_TOKEN),
            "member": int(settings.TOOLHUB_MCP_MAX_SESSIONS_PER_MEMBER)}


def open_counts(counted: dict[str, str]) -> dict[str, int]:
    """How many sessions each cap's index lists that are still open on any process (their record stands; an
    ended session's record is deleted, an idle one's expires). The index drops the others as it goes.

    Two processes admitting at the same instant may each miss the other's newest session (the index is one
    cache value, not a transaction): a cap can be passed by the number of processes, never more."""
    out: dict[str, int] = {}
    for per, cap in counted.items():
        index = _index(cap)
        listed = list(cache.get(index) or [])
        alive = set(cache.get_many([_key(sid) for sid in listed])) if listed else set()
        kept = [sid for sid in listed if _key(sid) in alive]
        if len(kept) != len(listed):
            cache.set(index, kept, timeout=_ttl())
        out[per] = len(kept)
    return out


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


def forget(session_id: str) -> None:
    cache.delete(_key(session_id))


class SharedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, plus adoption of sessions opened by another process, and transports that
    answer a request with plain JSON when they have nothing to stream (agents_app.gateway.transport)."""

    def _transport(self, session_id: str) -> StreamableHTTPServerTransport:
        return LateCommitTransport(
            mcp_session_id=session_id, is_json_response_enabled=self.json_response, event_store=self.event_store,
            security_settings=self.security_settings, retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )

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
        await super()._handle_stateful_request(scope, receive, send)
        if session_id and scope.get("method") == "DELETE" and session_id not in self._server_instances:
            await anyio.to_thread.run_sync(forget, session_id)

    def live_sessions(self) -> set[str]:
        return set(list(self._server_instances))

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        _served.pop(session_id, None)
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
