"""What the gateway adds for MCP 2026-07-28 clients: sealed `requestState`, approvals asked as input requests,
`server/discover` and the lists' cache hints.

A 2026-07-28 client holds no session: every request is a self-contained POST (the SDK's modern entry) and
whatever must survive between the rounds of one call rides in `requestState`, sealed here with AES-256-GCM
under keys derived from TOOLHUB_SECRET_KEYS (or TOOLHUB_MCP_REQUEST_STATE_KEYS), so any web process of the
deployment, before or after a restart, opens what another one sealed, and a client can neither read nor
alter it. The seal binds the method, the tool and its arguments, the caller (tenant, member, agent) and an
expiry (the SDK's `RequestStateBoundary` checks all of them).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import AESGCMRequestStateCodec, RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from core import crypto
from core.codes import ApiCode

AUDIENCE = "toolhub/mcp-gateway"
SERVER_INFO_META_KEY = types.SERVER_INFO_META_KEY
APPROVAL_KEY = "toolhub-approval"  # the input request's key in InputRequiredResult.inputRequests
_KEY_LABEL = b"toolhub/mcp-request-state/v1"


def is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The request came over the 2026-07-28 wire (no session, input requests instead of server requests)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


# --- requestState ------------------------------------------------------------------------------------------


def state_keys() -> list[bytes]:
    """The ring sealing requestState: the first key seals, every key opens (rotation as TOOLHUB_SECRET_KEYS).

    Each key is derived (HMAC-SHA256 under a label of its own), so a request-state key is never a key that
    encrypts secrets at rest."""
    roots = [str(k) for k in settings.TOOLHUB_MCP_REQUEST_STATE_KEYS] or crypto.key_ring()
    return [hmac.new(root.encode(), _KEY_LABEL, hashlib.sha256).digest() for root in roots]


def _caller(principal_of: Callable[[ServerRequestContext[Any, Any]], Any]
            ) -> Callable[[ServerRequestContext[Any, Any]], str | None]:
    """The caller a sealed state is bound to: tenant, member and agent (another member, or the same member on
    another agent's URL, cannot replay it)."""

    def bind(ctx: ServerRequestContext[Any, Any]) -> str | None:
        principal = principal_of(ctx)
        if principal is None:
            return None
        return f"{principal.tenant.pk}:{principal.user.pk}:{principal.agent.pk}"

    return bind


class SettingsCodec:
    """The SDK's AES-256-GCM codec over the ring the settings name now (read per use, built once per ring)."""

    def __init__(self) -> None:
        self._built: tuple[tuple[bytes, ...], AESGCMRequestStateCodec] | None = None

    def _codec(self) -> AESGCMRequestStateCodec:
        ring = tuple(state_keys())
        built = self._built
        if built is None or built[0] != ring:
            built = self._built = (ring, AESGCMRequestStateCodec(list(ring)))
        return built[1]

    def seal(self, payload: bytes) -> str:
        return self._codec().seal(payload)

    def unseal(self, token: str) -> bytes:
        return self._codec().unseal(token)


def state_boundary(principal_of: Callable[[ServerRequestContext[Any, Any]], Any]) -> RequestStateBoundary:
    """The SDK's boundary under Toolhub's keys; `principal_of` finds the request's principal (None without one)."""
    security = RequestStateSecurity(codec=SettingsCodec(), ttl=float(settings.TOOLHUB_MCP_REQUEST_STATE_TTL_S),
                                    bind_principal=_caller(principal_of))
    return RequestStateBoundary(security, default_audience=AUDIENCE)


class TypedStateRefusal:
    """Outside the SDK's boundary: a requestState that fails verification (tampered, expired, another caller's,
    sealed under a key no longer in the ring) is refused with Toolhub's typed code in the error's data."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await call_next(ctx)
        except MCPError as exc:
            data = exc.error.data
            if isinstance(data, dict) and data.get("reason") == "invalid_request_state":
                raise MCPError(code=exc.error.code, message=(
                    "requestState is invalid or expired: pass back the requestState of this call's last "
                    "input_required result unchanged, or call again without one"),
                    data={"code": ApiCode.INVALID_REQUEST_STATE, "reason": "invalid_request_state"}) from None
            raise


def approval_state(approval_id: int) -> str:
    return json.dumps({"approval": int(approval_id)})


def approval_of(params: types.CallToolRequestParams) -> int | None:
    """The approval a retried call carries in its (already verified and opened) requestState."""
    raw = params.request_state
    if not raw:
        return None
    try:
        state = json.loads(raw)
    except ValueError:
        return None
    approval = state.get("approval") if isinstance(state, dict) else None
    return approval if isinstance(approval, int) else None


def approval_answer(params: types.CallToolRequestParams) -> types.ElicitResult | None:
    """The client's answer to the approval question, when the retry carries one."""
    answer = (params.input_responses or {}).get(APPROVAL_KEY)
    return answer if isinstance(answer, types.ElicitResult) else None


def ask_approval(approval_id: int, message: str, schema: dict[str, Any]) -> types.InputRequiredResult:
    """The approval question as an input request; the client retries the call with its answer."""
    question = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
    return types.InputRequiredResult(input_requests={APPROVAL_KEY: question}, request_state=approval_state(approval_id))


# --- discover and cache hints ------------------------------------------------------------------------------


def list_hints() -> dict[str, Any]:
    """`ttlMs` and `cacheScope` of every list: private, since toolsets differ per caller."""
    return {"ttl_ms": int(settings.TOOLHUB_MCP_LIST_TTL_MS), "cache_scope": "private"}


def wire_hints() -> dict[str, Any]:
    return {"ttlMs": int(settings.TOOLHUB_MCP_LIST_TTL_MS), "cacheScope": "private"}


def sorted_by(items: list[Any], key: str) -> list[Any]:
    """A list in a deterministic order (by name or URI), so equal listings are equal bytes."""
    def of(item: Any) -> str:
        value = item.get(key) if isinstance(item, Mapping) else getattr(item, key, "")
        return str(value or "")

    return sorted(items, key=of)


# --- the tools/list a 2026 tools/call runs for its Mcp-Param-* headers ---------------------------------------
#
# Before dispatching a 2026 tools/call with arguments, the SDK resolves the tool's input schema through the
# server's own tools/list handler (to check Mcp-Param-* headers against the body's arguments): a whole listing,
# with its database hop, on every call. That check is consistency, not authority (the call itself is authorised
# from the database), and a client may itself hold a listing for `ttlMs`; so the listing is kept per caller on
# the event loop for as long, and the schema check of a call reads it. The SDK reads it through the server's
# `get_tool_input_schema` (agents_app.gateway.server.tool_input_schema): the gateway's ASGI layer puts the caller's
# schemas in the request's context before the SDK sees the request, so the check no longer dispatches a whole
# tools/list (middleware, handler, the listing's pydantic validation and dump) through the server on every call.

MEMO_SIZE = 2048


class SchemaListings:
    """Per caller (tenant, member, agent): the last listing answered and when, loop-side (no locks, no hops), with
    each tool's input schema by name (what a call's Mcp-Param-* check reads: `schemas`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._kept: dict[str, tuple[float, list[Any], dict[str, Any]]] = {}

    def _fresh(self, caller: str) -> tuple[float, list[Any], dict[str, Any]] | None:
        kept = self._kept.get(caller)
        ttl_s = int(settings.TOOLHUB_MCP_LIST_TTL_MS) / 1000
        if kept is None or self.clock() - kept[0] >= ttl_s:
            return None
        return kept

    def get(self, caller: str) -> list[Any] | None:
        kept = self._fresh(caller)
        return None if kept is None else kept[1]

    def schemas(self, caller: str) -> dict[str, Any] | None:
        """Each listed tool's input schema by name, while the listing is kept."""
        kept = self._fresh(caller)
        return None if kept is None else kept[2]

    def put(self, caller: str, tools: list[Any]) -> None:
        self._kept.pop(caller, None)
        if len(self._kept) >= MEMO_SIZE:
            self._kept.pop(next(iter(self._kept)))  # the oldest written
        self._kept[caller] = (self.clock(), tools, {tool.name: tool.input_schema for tool in tools})


def resolves_call_schema(headers: Mapping[str, str] | None) -> bool:
    """A tools/list the SDK runs inside a tools/call (its request's Mcp-Method says tools/call)."""
    return headers is not None and headers.get("mcp-method") == "tools/call"
