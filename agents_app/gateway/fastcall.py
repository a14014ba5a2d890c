"""The gateway's fast path for a warm, plain `tools/call`: answered without the MCP SDK's server machinery.

When it applies (anything else, or any doubt, goes to the SDK's path unchanged, which then answers every refusal):
- TOOLHUB_MCP_FASTCALL is on and tracing is off (the SDK's path keeps its spans);
- one JSON-RPC `tools/call` request, its body whole, from a client accepting JSON and SSE (the gateway's transports
  then answer JSON too), that can be sent nothing before its answer: no `progressToken`, no log level in `_meta`;
- the client declared neither elicitation nor sampling (no input request can be put to it mid-call), and the call
  carries no `requestState` or `inputResponses` (no round of an earlier call, no approval answered);
- not tool search's `search_functions`/`call`;
- no approval could be asked: the caller's toolset (the hot cache) says the function needs none, and the caller is
  not marked after a flagged result (checked in the call's own worker job, before anything is counted);
- 2025 (session) clients: the request passed every check of the SDK's transport and session manager (the session id,
  its owner, the session not ended, the Accept and Content-Type headers: `gateway.transport.LateCommitTransport`
  calls in after them, and the ASGI layer touched the session as for any request), and the session's SDK connection
  has been seen initialized here (`sessions.note_connection`; an adopted session's first request takes the SDK's
  path);
- 2026-07-28 clients: the SDK's own inbound ladder accepts it (routing headers, Mcp-Method/Mcp-Name against the body,
  the protocol version, `Mcp-Param-*` against the caller's kept schema).

What it runs is the SDK path's own: Toolhub's server middleware (the message's generation reads, the 2026 stamp, the
requestState boundary), the SDK's surface validation of the params and of the result for the revision
(`ServerRunner._serialize`), `server._call` (throttle, toolset, role, quota, invoke, audit, rendering in one worker
job), the same refusals (`Refused`), the same JSON-RPC error mapping, the same JSON body. What it skips: the
session's memory streams and dispatcher task (2025), the per-request `Connection`/`ServerRunner`, the handler
registry and the SDK's OpenTelemetry middleware (a no-op without tracing).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any, cast

import mcp_types as types
from django.conf import settings
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server._streamable_http_modern import _mcp_param_rejection
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner, _dump_result, modern_error_data
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import LOG_LEVEL_META_KEY, ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse
from mcp_types import methods as _methods
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Scope

from agents_app.gateway import search, server, service, sessions
from agents_app.gateway.calls import after_flagged
from agents_app.gateway.service import Principal
from core import tracing
from tools_app.runtime.mcp.client_requests import ClientRequests, Resume

logger = logging.getLogger(__name__)

Answer = JSONRPCResponse | JSONRPCError
METHOD = "tools/call"


class _Declined(Exception):
    """The fast path does not take this request (raised before anything is counted or run)."""


def enabled() -> bool:
    return bool(settings.TOOLHUB_MCP_FASTCALL) and not tracing.enabled()


def _plain(params: Any, capabilities: types.ClientCapabilities | None) -> bool:
    """Nothing can be sent to the client before this call's answer, nor asked of it during the call."""
    if not isinstance(params, Mapping):
        return False
    meta = params.get("_meta")
    if meta is not None and (not isinstance(meta, Mapping) or "progressToken" in meta or LOG_LEVEL_META_KEY in meta):
        return False
    if capabilities is not None and (capabilities.elicitation is not None or capabilities.sampling is not None):
        return False
    name = params.get("name")
    return (isinstance(name, str) and name not in search.META_NAMES and params.get("requestState") is None
            and params.get("inputResponses") is None)


def _job(principal: Principal, name: str, arguments: dict[str, Any], requests: ClientRequests,
         base_url: service.BaseUrl) -> tuple[service.CallOutcome, server.Wire | None] | None:
    """The SDK path's worker job (`server._call`), unless the call could be held for approval (None: nothing was
    counted yet; the SDK's path then asks). The same rule as `calls._call_function`'s, read first: the caller's
    flag is read once per job (`unflagged`), not again by `_call_function`."""
    fn = service.listing(principal).by_name.get(name)
    if fn is not None and principal.may_call and (
            fn.function.needs_approval or (not fn.read_only and after_flagged(principal))):
        return None
    return server._call(principal, name, arguments, None, requests, base_url, unflagged=True)


class FastCalls:
    """The fast path of one gateway `Server` (gateway.transport.FastAnswers); `answered` counts what it answered."""

    def __init__(self, app: Server[Any]) -> None:
        self.app = app
        # Toolhub's own middleware, as the SDK's runner composes it (the SDK's OpenTelemetry span left out).
        self.middleware = [m for m in app.middleware if not isinstance(m, OpenTelemetryMiddleware)]
        self._shape = ServerRunner(app, cast(Any, None), None)._serialize  # reads the server only
        self.answered = 0

    async def legacy(self, message: JSONRPCRequest, request: Request, session_id: str) -> Answer | None:
        """A 2025 session's request, after the SDK transport's own checks."""
        if message.method != METHOD or not enabled():
            return None
        connection = sessions.connection_of(session_id)
        if connection is None or not connection.initialize_accepted:
            return None
        return await self._answer(request, message.id, message.params, connection.protocol_version,
                                  connection.client_capabilities, modern=False)

    async def modern(self, security_settings: TransportSecuritySettings | None, scope: Scope, body: bytes
                     ) -> Answer | None:
        """A 2026-07-28 POST (its body whole, Accept checked) through the SDK's inbound ladder; None on any refusal."""
        if not enabled():
            return None
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or decoded.get("method") != METHOD:
            return None
        request = Request(scope)
        if await TransportSecurityMiddleware(security_settings).validate_request(request, is_post=True) is not None:
            return None
        try:
            req = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        if find_duplicated_routing_header(request.headers.items()) is not None:
            return None
        verdict = classify_inbound_request(decoded, headers=dict(request.headers))
        if isinstance(verdict, InboundLadderRejection):
            return None
        if await _mcp_param_rejection(self.app, request, req, verdict, None) is not None:
            return None
        connection = Connection.from_envelope(verdict.protocol_version, verdict.client_info,
                                              verdict.client_capabilities)
        return await self._answer(request, req.id, req.params, verdict.protocol_version,
                                  connection.client_capabilities, modern=True)

    async def _answer(self, request: Request, request_id: types.RequestId, params: Any, version: str,
                      capabilities: types.ClientCapabilities | None, *, modern: bool) -> Answer | None:
        if not _plain(params, capabilities):
            return None
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=cast(Any, None), lifespan_context=None, protocol_version=version, method=METHOD, params=params,
            request_id=request_id, request=request)
        call: CallNext = partial(self._inner, modern=modern)
        for middleware in reversed(self.middleware):
            call = partial(_apply, middleware, call)
        try:
            result = _dump_result(await call(ctx))
        except _Declined:
            return None
        except Exception as exc:  # noqa: BLE001 - the SDK's mapping of a handler's exception, per era
            return JSONRPCError(jsonrpc="2.0", id=request_id, error=_error_data(exc, modern=modern))
        self.answered += 1
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)

    async def _inner(self, ctx: ServerRequestContext[Any, Any], *, modern: bool) -> HandlerResult:
        """The SDK runner's `_inner` for tools/call with the handler narrowed to a plain call (server.call_tool)."""
        try:
            _methods.validate_client_request(METHOD, ctx.protocol_version, ctx.params)
            params = types.CallToolRequestParams.model_validate(ctx.params, by_name=False)
        except (KeyError, ValidationError):
            raise _Declined from None  # the SDK's path answers it
        principal = server.principal_of(ctx)
        arguments = dict(params.arguments or {})
        requests = server.declined_requests(Resume() if modern else None)
        try:
            # The base URL is read only for a connect link (rare): not built for every call.
            ran = await server.db(_job, principal, params.name, arguments, requests, partial(server._base_url, ctx))
        except service.Refusal as refusal:
            raise server.Refused(refusal) from None
        if ran is None:
            raise _Declined
        if modern:
            done = server.settled(ran)
            if isinstance(done, types.InputRequiredResult):
                return self._shape(METHOD, ctx.protocol_version, done)  # the upstream asked: it rides this result
            ran = done
        outcome, rendered = ran
        if rendered is None:  # held for approval after all (the policy changed meanwhile): as for such a client
            return self._shape(METHOD, ctx.protocol_version, server._pending(ctx, outcome))
        return self._shape(METHOD, ctx.protocol_version, server._for_wire(ctx, rendered))


def _apply(middleware: Any, call_next: CallNext, ctx: ServerRequestContext[Any, Any]) -> Any:
    return middleware(ctx, call_next)


def _error_data(exc: Exception, *, modern: bool) -> ErrorData:
    if modern:
        return modern_error_data(exc)
    error = handler_exception_to_error_data(exc)
    if error is None:  # the 2025 dispatcher's catch-all
        logger.exception("handler for %r raised", METHOD)
        error = ErrorData(code=0, message=str(exc))
    return error
