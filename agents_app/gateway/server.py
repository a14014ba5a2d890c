"""The gateway's MCP server: one lowlevel `Server` whose handlers answer for the agent the request names.

The ASGI layer authenticates every HTTP request and puts a `Principal` in the ASGI scope; handlers read it
from `ctx.request` (each POST of streamable HTTP, each message POST of SSE), so identity and permissions
are checked per message, never remembered from the handshake.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import anyio
import mcp_types as types
from django.conf import settings
from django.db import close_old_connections
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError, NoBackChannelError, UrlElicitationRequiredError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agents_app.gateway import modern, relay, search, service, sessions
from agents_app.gateway.listen import ChangeHub, ListenHandler
from agents_app.gateway.service import CallOutcome, GatewayFunction, Principal
from core import hotcache, tracing
from core.codes import ApiCode, ResultCode
from core.errors import NotFound
from core.exceptions import unavailable_service
from core.secrets import scrub_text
from tools_app.runtime import approval_policy
from tools_app.runtime import result as codes
from tools_app.runtime.mcp.client_requests import (
    INPUT_REQUIRED,
    INPUT_STATE_STALE,
    ClientRequestRefused,
    ClientRequests,
    Resume,
)
from tools_app.runtime.result import RESULT_META, UPSTREAM_ERROR

logger = logging.getLogger(__name__)

PRINCIPAL_KEY = "toolhub.principal"
TRACE_KEY = "toolhub.trace_context"  # the HTTP request span's context, for handlers (core.tracing)
COUNTED_KEY = "toolhub.session_caps"  # the caps a session opened by the request counts under (gateway.asgi)
# One HTTP message's hot-cache generation reads (core.hotcache.request_scope), shared by the hops serving it: its
# authentication in gateway.asgi and its handler's db() jobs read the generations once, not once a hop. Carried
# in the request's scope, not in a context variable the handler inherits: a session's handlers run in a task
# spawned under its first request's context, which must not pin that request's reads.
GENERATIONS_KEY = "toolhub.generations"
_message_generations: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "toolhub_gateway_generations", default=None)


@contextmanager
def message_generations(memo: dict[str, int] | None) -> Iterator[None]:
    """db() jobs started inside share `memo` (one message's generation reads); None: each job reads its own."""
    token = _message_generations.set(memo)
    try:
        yield
    finally:
        _message_generations.reset(token)
# The input schemas by tool name the caller of one 2026 tools/call was listed (gateway.modern.SchemaListings), set by
# the ASGI layer around the request: the SDK's Mcp-Param-* header check reads them (`tool_input_schema`).
_call_schemas: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "toolhub_gateway_call_schemas", default=None)


@contextmanager
def call_schemas(schemas: Mapping[str, Any] | None) -> Iterator[None]:
    token = _call_schemas.set(schemas)
    try:
        yield
    finally:
        _call_schemas.reset(token)


def tool_input_schema(name: str) -> Any:
    """The Server's `get_tool_input_schema`: the called tool's input schema as this caller was listed it; None when
    the listing does not have it (the SDK then checks nothing, as it does for a tool its listing lacks)."""
    schemas = _call_schemas.get()
    return None if schemas is None else schemas.get(name)


SERVER_VERSION = "1"
# The `_meta` key of Toolhub's own typed refusals in a tools/call result (error_code, approval_id, approve_url).
REFUSAL_META = "toolhub/refusal"
PROGRESS_SEND_S = 5.0
T = TypeVar("T")


class ServiceUnavailable(MCPError):
    """PostgreSQL or Redis is restarting: a typed JSON-RPC error a client may retry, never the driver's text.

    The HTTP layer (gateway.asgi) answers it, before a response has started, as the API's 503
    `service_unavailable` with Retry-After."""

    CODE = -32001  # JSON-RPC's implementation-defined server error range
    RETRY_AFTER_S = 2

    def __init__(self, service: str, *, api_code: str = ApiCode.SERVICE_UNAVAILABLE, message: str = "") -> None:
        self.service, self.api_code = service, api_code
        self.text = message or f"The {service} is briefly unavailable; retry shortly."
        super().__init__(code=self.CODE, message=self.text,
                         data={"code": api_code, "service": service, "retry_after_s": self.RETRY_AFTER_S})


class Refused(MCPError):
    """A typed refusal of Toolhub's own (throttle, role, approval, an upstream's failure of a prompt or resource):
    a JSON-RPC error whose data names the code, as the API's error body does."""

    CODE = -32003  # JSON-RPC's implementation-defined server error range

    def __init__(self, refusal: service.Refusal) -> None:
        super().__init__(code=self.CODE, message=refusal.message, data={"code": refusal.code, **refusal.details})


def _refused(refusal: service.Refusal) -> MCPError:
    """A refusal as its JSON-RPC error: a requestState that cannot be resumed is invalid params (as the seal's own
    refusals are), the rest Toolhub's typed refusal."""
    if refusal.code == ApiCode.INVALID_REQUEST_STATE:
        return MCPError(code=types.INVALID_PARAMS, message=refusal.message,
                        data={"code": refusal.code, **refusal.details})
    return Refused(refusal)


async def db(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ORM work in a worker thread, with Django's per-request connection hygiene around it."""

    def job() -> T:
        close_old_connections()
        try:
            # One message reads each snapshot generation once (GENERATIONS_KEY), else one hop does.
            with hotcache.request_scope(_message_generations.get()):
                return fn(*args, **kwargs)
        except Exception as exc:
            if (service := unavailable_service(exc)) is None:
                raise
            logger.warning("gateway: %s unavailable: %s", service, type(exc).__name__)
            raise ServiceUnavailable(service) from None
        finally:
            close_old_connections()

    # The loop's default executor, as sync_to_async(thread_sensitive=False) uses, minus its two-way context
    # copying: ~30 us less per hop, and a warm call makes two.
    return await asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, job)


def principal_of(ctx: ServerRequestContext[Any, Any]) -> Principal:
    request = ctx.request
    principal = getattr(request, "scope", {}).get(PRINCIPAL_KEY) if request is not None else None
    if not isinstance(principal, Principal):
        raise MCPError(code=types.INVALID_REQUEST, message="this endpoint serves authenticated HTTP requests only")
    return principal


def _principal_or_none(ctx: ServerRequestContext[Any, Any]) -> Principal | None:
    principal = getattr(ctx.request, "scope", {}).get(PRINCIPAL_KEY) if ctx.request is not None else None
    return principal if isinstance(principal, Principal) else None


def _connection(ctx: ServerRequestContext[Any, Any]) -> Any:
    return getattr(ctx.session, "_connection", None)


# --- list_changed ---------------------------------------------------------------------------------


@dataclass
class _Watch:
    principal: Principal
    fingerprint: str | None


class ListChangedWatcher:
    """Tells connected clients when their tools/list would answer differently.

    The toolset lives in the database, so every process sees every change: each sweep recomputes the
    fingerprint of (agent, user) pairs that have a live connection here and notifies on a difference.
    Connections are held weakly; a session that ends simply drops out.
    """

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._watches: weakref.WeakKeyDictionary[Any, _Watch] = weakref.WeakKeyDictionary()

    def watch(self, connection: Any, principal: Principal, fingerprint: str | None) -> None:
        if connection is None:
            return
        current = self._watches.get(connection)
        if current is None:
            self._watches[connection] = _Watch(principal, fingerprint)
        elif current.fingerprint is None:
            current.fingerprint = fingerprint

    def __len__(self) -> int:
        return len(self._watches)

    async def run(self) -> None:
        while True:
            await anyio.sleep(self.interval_s)
            try:
                await self.sweep()
            except Exception:  # a failed sweep (e.g. the database restarting) must not end the watcher
                logger.exception("gateway list_changed sweep failed")

    async def sweep(self) -> int:
        """One pass; returns how many notifications were sent."""
        groups: dict[tuple[int, int], list[tuple[Any, _Watch]]] = {}
        for connection, watch in list(self._watches.items()):
            if getattr(connection, "has_standalone_channel", True):
                groups.setdefault(watch.principal.key, []).append((connection, watch))
        sent = 0
        for members in groups.values():
            fingerprint = await db(service.fingerprint, members[0][1].principal)
            for connection, watch in members:
                if watch.fingerprint is None:
                    watch.fingerprint = fingerprint
                elif watch.fingerprint != fingerprint:
                    watch.fingerprint = fingerprint
                    await connection.send_tool_list_changed()
                    sent += 1
        return sent


# --- handlers -------------------------------------------------------------------------------------


def _mcp_tool(fn: GatewayFunction) -> types.Tool:
    """The definition as the server sent it, under its qualified name (GatewayFunction says what Toolhub adds)."""
    return types.Tool.model_validate({
        "name": fn.name,
        "title": fn.title,
        "description": fn.description,
        "inputSchema": fn.input_schema,
        **({"outputSchema": fn.output_schema} if fn.output_schema else {}),
        "annotations": dict(fn.annotations or {}),
        **({"_meta": dict(fn.meta)} if fn.meta else {}),
        **({"icons": [dict(i) for i in fn.icons]} if fn.icons else {}),
    })


async def _list_found(ctx: ServerRequestContext[Any, Any], names: list[str]) -> None:
    """Functions a 2025 session's search found join its tools/list; the client hears `tools/list_changed` on the
    search's own response stream (a client that ignores it calls them by name or through `call`)."""
    session_id = getattr(_connection(ctx), "session_id", None)
    if not names or not session_id or not await db(search.remember_found, session_id, names):
        return
    try:
        await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=ctx.request_id)
    except Exception:  # the answer matters more than the hint; the next tools/list shows them
        logger.warning("could not send tools/list_changed after a search", exc_info=True)


def _listing(principal: Principal) -> tuple[list[GatewayFunction], str]:
    made = service.listing(principal)
    return list(made.functions), made.fingerprint


def _visible_listing(principal: Principal, session_id: str | None = None
                     ) -> tuple[list[dict[str, Any]], list[GatewayFunction], str]:
    """tools/list's database work in one thread hop: the toolset, and what tool search shows of it (its
    meta-tools, fewer functions, and what search found in the 2025 session `session_id`). A 2026 tools/call with
    arguments runs it too (the SDK resolves the tool's schema for its Mcp-Param-* headers through tools/list), so
    each hop saved counts twice."""
    functions, fingerprint = _listing(principal)
    meta, shown = search.visible(principal, functions, search.found_in_session(session_id))
    return meta, shown, fingerprint


# A tools/call result as its wire dict: the SDK validates a handler's result for the negotiated revision once on the
# way out (ServerRunner._serialize); a CallToolResult model built here would be validated, dumped and validated again.
Wire = dict[str, Any]


def _rendered(principal: Principal, outcome: CallOutcome) -> Wire:
    """The outcome as MCP content; the deployment's outage (no LOCAL server runner reachable, e.g. while Redis
    restarts) is not the tool's error result but the typed JSON-RPC error a client retries, as for a database or
    cache outage."""
    result = outcome.result
    if not result.success and result.meta.get("outage"):
        raise ServiceUnavailable("runner", api_code=str(result.meta["outage"]), message=result.error or "")
    return _content(principal, outcome)


def _content(principal: Principal, outcome: CallOutcome) -> Wire:
    """The ToolResult as MCP content (the wire dict): the server's own content list whole when the runtime kept it."""
    result = outcome.result
    upstream = bool(result.meta.get(UPSTREAM_ERROR))
    if not result.success and not upstream:
        # Toolhub's own refusal (validation, role, breaker, approval...): typed by its code.
        message = f"{result.error_code}: {result.error or 'the call failed'}"
        typed = {"error_code": result.error_code}
        if result.error_reason:
            typed["error_reason"] = result.error_reason
        if result.meta.get("quota"):  # QUOTA_EXCEEDED: {scope, limit, reset_at, ...} as the API's `details`
            typed["details"] = result.meta["quota"]
        link = result.meta.get(service.AUTHORIZE_URL)
        page = result.meta.get(service.CONNECTIONS_URL)
        if link:
            # The caller's own connect link: open it, sign in upstream, call again.
            typed["authorize_url"] = link
            message += f" Connect it at {link} (sign in there), then call this tool again."
        elif page:
            typed["connections_url"] = page
            message += f" Set your own keys at {page}, then call this tool again."
        return {"content": [{"type": "text", "text": message}], "isError": True, "_meta": {REFUSAL_META: typed}}
    secrets = service.secrets_of(principal, outcome.function)

    def scrub(text: str) -> str:
        return scrub_text(text, secrets) if secrets else text

    raw = getattr(result, "content", None) or result.meta.get("content")
    if isinstance(raw, list) and raw:
        blocks = json.loads(scrub(json.dumps(raw)))
    else:
        text = result.text or (json.dumps(result.data, default=str) if result.data is not None else "")
        blocks = [{"type": "text", "text": scrub(text)}]
    wire: dict[str, Any] = {"content": blocks, "isError": upstream}
    if isinstance(result.data, dict):
        wire["structuredContent"] = json.loads(scrub(json.dumps(result.data, default=str)))
    elif result.meta.get(service.HANDED_OVER) and outcome.function is not None and outcome.function.output_schema:
        # A result Toolhub rebuilt without the structured part (an approved run handed over from its audit row,
        # too large to keep whole) cannot meet the declared outputSchema: say so rather than break the client.
        return {"content": [{"type": "text", "text": (
            f"{codes.EXECUTION_ERROR}: the call ran (call {outcome.call_id}) but its structured result was not "
            "kept; see it in Toolhub's audit log")}], "isError": True}
    meta = result.meta.get(RESULT_META)
    if isinstance(meta, dict) and meta:
        wire["_meta"] = json.loads(scrub(json.dumps(meta, default=str)))
    # The server's own isError result passes through whole: its content parts, structuredContent, _meta.
    return wire


def _for_wire(ctx: ServerRequestContext[Any, Any], rendered: Wire) -> Wire:
    """A rendered result as this request's revision wants it: a 2026-07-28 result names its `resultType`."""
    return {"resultType": "complete", **rendered} if modern.is_modern(ctx) else rendered


def _call(principal: Principal, name: str, arguments: dict[str, Any], on_progress: Any = None,
          client_requests: ClientRequests | None = None, base_url: service.BaseUrl = "",
          continuing: int | None = None, *, unflagged: bool = False) -> tuple[CallOutcome, Wire | None]:
    """One worker-thread hop for the call and, unless it is held for approval, its rendering."""
    outcome = service.call_function(principal, name, arguments, on_progress, client_requests, base_url=base_url,
                                    continuing=continuing, unflagged=unflagged)
    unfinished = outcome.result.meta.get(INPUT_REQUIRED) or outcome.result.meta.get(INPUT_STATE_STALE)
    return outcome, (None if outcome.held or unfinished else _rendered(principal, outcome))


def settled(ran: tuple[CallOutcome, Wire | None]) -> tuple[CallOutcome, Wire | None] | types.InputRequiredResult:
    """A 2026-07-28 call's job done: its outcome, or a 2026 upstream's questions as this gateway's input request (its
    state rides ours: relay.hand_back); a round the tool changed under is refused as a stale requestState."""
    meta = ran[0].result.meta
    if meta.get(INPUT_STATE_STALE):
        raise MCPError(code=types.INVALID_PARAMS, message=ran[0].result.error or "requestState is stale",
                       data={"code": ApiCode.INVALID_REQUEST_STATE, "reason": "tool_changed"})
    if meta.get(INPUT_REQUIRED):  # a 2026 upstream asked: its state rides ours (relay.hand_back)
        return relay.hand_back(meta[INPUT_REQUIRED], ran[0].call_id)
    return ran


def _progress_forwarder(ctx: ServerRequestContext[Any, Any]) -> Callable[[float, float | None, str | None], None] | None:
    """When the client sent a progressToken: a callback (run on the call's worker thread) that forwards the
    upstream server's progress to this client, with the client's own token, on this request's stream."""
    token = progress_token_from_params(ctx.params)
    if token is None:
        return None
    loop = asyncio.get_running_loop()

    def forward(progress: float, total: float | None, message: str | None) -> None:
        sent = asyncio.run_coroutine_threadsafe(ctx.session.send_progress_notification(
            token, progress, total, message, related_request_id=ctx.request_id), loop)  # type: ignore[arg-type]
        try:
            sent.result(PROGRESS_SEND_S)  # in order, and never piling up behind a slow client
        except Exception as exc:  # noqa: BLE001 - a progress note that cannot be sent must not fail the call
            logger.info("gateway: progress not forwarded: %s", type(exc).__name__)

    return forward


# What a client's declared capabilities are checked against (built once: two pydantic models per call otherwise).
_SAMPLING = types.ClientCapabilities(sampling=types.SamplingCapability())
_ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())

NOT_DECLARED = ("declined: the MCP client using this Toolhub gateway did not declare {what}, so nobody can answer "
                "the server's {request}")


def _client_requests(ctx: ServerRequestContext[Any, Any], relayed: relay.Relay | None = None,
                     stateless: Resume | None = None) -> ClientRequests:
    """The upstream server's own requests during this call (sampling, elicitation), forwarded to this gateway
    client when it declared the capability, on this call's stream (a 2026-07-28 client: as input requests through
    `relayed`); declined with the reason otherwise. They run on the call's worker thread and wait here for the
    client's answer (TOOLHUB_MCP_ELICIT_TIMEOUT_S at most). Sampling also needs the tool's `sampling` setting
    (tools_app.runtime.mcp.connection: a tool without it never offers sampling to its server)."""
    loop = asyncio.get_running_loop()

    def declared(capability: types.ClientCapabilities) -> bool:
        try:
            return bool(ctx.session.check_client_capability(capability))
        except Exception:  # noqa: BLE001 - an era without the capability cannot be asked
            return False

    def forward(request: Any, result_type: Any) -> dict[str, Any]:
        async def ask() -> Any:
            return await ctx.session.send_request(request, result_type,
                                                  metadata=ServerMessageMetadata(related_request_id=ctx.request_id))

        timeout = float(settings.TOOLHUB_MCP_ELICIT_TIMEOUT_S)
        try:
            answer = asyncio.run_coroutine_threadsafe(asyncio.wait_for(ask(), timeout), loop).result(timeout + 5)
        except MCPError as exc:
            raise ClientRequestRefused(f"the gateway's client refused: {exc.error.message}") from None
        except NoBackChannelError:  # (a 2026-07-28 client is asked through `relayed`, never here)
            raise ClientRequestRefused("declined: this gateway session has no way back to its client "
                                       "(stateless mode)") from None
        except TimeoutError:
            raise ClientRequestRefused("declined: the gateway's client did not answer in time") from None
        dumped: dict[str, Any] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        request = types.CreateMessageRequest(params=types.CreateMessageRequestParams.model_validate(params))
        return forward(request, types.CreateMessageResult)

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        url_mode = params.get("mode") == "url"
        shape = types.ElicitRequestURLParams if url_mode else types.ElicitRequestFormParams
        return forward(types.ElicitRequest(params=shape.model_validate(params)), types.ElicitResult)

    may_sample = declared(_SAMPLING)
    may_elicit = declared(_ELICITATION)
    if relayed is not None:  # 2026-07-28: the question rides an input_required result (agents_app.gateway.relay)
        elicit, sample = relayed.ask, relayed.sample
    return _requests(sample if may_sample else None, elicit if may_elicit else None, stateless)


def _requests(sample: Any, elicit: Any, stateless: Resume | None) -> ClientRequests:
    return ClientRequests(
        sample=sample, elicit=elicit,
        no_sample=NOT_DECLARED.format(what="sampling", request="request for a model completion"),
        no_elicit=NOT_DECLARED.format(what="elicitation", request="question"), stateless=stateless)


def declined_requests(stateless: Resume | None) -> ClientRequests:
    """What `_client_requests` gives a client that declared neither sampling nor elicitation: every upstream
    request declined with the reason (a 2026 upstream's questions still handed back, with `stateless`)."""
    return _requests(None, None, stateless)


def _base_url(ctx: ServerRequestContext[Any, Any]) -> str:
    """Toolhub's public origin for links handed to this client: TOOLHUB_PUBLIC_URL, else the request's own."""
    configured = str(getattr(settings, "TOOLHUB_PUBLIC_URL", "") or "").strip()
    if configured:
        return configured.rstrip("/")
    request = ctx.request
    return str(request.base_url).rstrip("/") if request is not None and hasattr(request, "base_url") else ""


def _pending(ctx: ServerRequestContext[Any, Any], outcome: CallOutcome) -> types.CallToolResult:
    base = _base_url(ctx)
    approval_id = outcome.approval_id
    decide = f"{base}/api/v1/approvals/{approval_id}/approve/"
    text = (
        f"APPROVAL_REQUIRED: {outcome.result.error or 'this call needs a person approval'}. "
        f"Pending approval id {approval_id}: a person decides it with POST {decide} (or .../deny/), "
        f"listed at {base}/api/v1/approvals/?status=pending. Once approved, call this tool again with the "
        "same arguments: it runs once."
    )
    typed = {"error_code": ResultCode.APPROVAL_REQUIRED, "approval_id": approval_id, "approve_url": decide}
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True,
                            "_meta": {REFUSAL_META: typed}}
    if outcome.function is None or not outcome.function.output_schema:
        # Clients check structuredContent against a declared outputSchema even on an error result (TypeScript
        # SDK): where the server declared one, the typed fields ride in _meta only.
        wire["structuredContent"] = typed
    return types.CallToolResult.model_validate(wire)


APPROVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve", "description": "Run this call now"},
    },
    "required": ["approve"],
}


def _elicitation_message(principal: Principal, outcome: CallOutcome, arguments: dict[str, Any]) -> str:
    fn = outcome.function
    assert fn is not None
    safety = fn.function.safety
    lines = [
        f"Toolhub agent {principal.agent.name!r} wants to call {fn.function.tool_name}.{fn.function.function}",
        f"arguments: {json.dumps(arguments, sort_keys=True, default=str)}",
        f"safety: {safety}",
    ]
    warning = approval_policy.approval_warning(safety)
    if warning:
        lines.append(warning)
    lines.append(f"(approval {outcome.approval_id})")
    return "\n".join(lines)


def _may_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    try:
        declared = ctx.session.check_client_capability(_ELICITATION)
    except Exception:  # noqa: BLE001 - an era without the capability simply cannot elicit
        return False
    return bool(declared)


def _may_elicit_url(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The client declared URL-mode elicitation (MCP 2025-11-25): it can open a link for its user and retry."""
    declared = ctx.session.client_capabilities
    return bool(declared is not None and declared.elicitation is not None and declared.elicitation.url is not None)


def _connect_first(name: str, link: str) -> UrlElicitationRequiredError:
    """The spec's answer to a call that needs the user to connect an account first (-32042, URL mode): the
    client shows the caller's own connect link (its flow id is the elicitation id) and calls again after."""
    flow = link.rstrip("/").rsplit("/", 1)[-1]
    return UrlElicitationRequiredError(
        [types.ElicitRequestURLParams(message=f"{name} acts with an account you have not connected yet: open this "
                                              "Toolhub link, sign in at the provider, then call it again.",
                                      url=link, elicitation_id=f"toolhub-oauth-{flow}")],
        message=f"{ResultCode.AUTHORIZATION_REQUIRED}: connect the account {name} uses first ({link})")


def _keys_first(name: str, page: str, call_id: Any) -> UrlElicitationRequiredError:
    """URL mode for a tool that needs the caller's own keys: their connections page, where they set them."""
    return UrlElicitationRequiredError(
        [types.ElicitRequestURLParams(message=f"{name} needs your own keys: set them on this Toolhub page, then "
                                              "call it again.", url=page, elicitation_id=f"toolhub-keys-{call_id}")],
        message=f"{ResultCode.CREDENTIALS_REQUIRED}: set your own keys for {name} first ({page})")


def _caller(principal: Principal) -> str:
    return f"{principal.tenant.pk}:{principal.user.pk}:{principal.agent.pk}"


def _tools(meta: list[dict[str, Any]], functions: list[GatewayFunction]) -> list[types.Tool]:
    return [types.Tool.model_validate(m) for m in meta] + [_mcp_tool(f) for f in functions]


class CallSchemas:
    """What a 2026 tools/call's Mcp-Param-* check reads: the caller's listing kept on the loop for ttlMs
    (gateway.modern.SchemaListings), listed afresh (one hop, as tools/list) once it ran out."""

    def __init__(self) -> None:
        self.listings = modern.SchemaListings(time.monotonic)

    async def modern_listing(self, principal: Principal) -> list[types.Tool]:
        """A 2026 client's tools/list: the toolset in one order whatever its assembly did, kept for the schema check."""
        meta, functions, _fingerprint = await db(_visible_listing, principal, None)
        tools = modern.sorted_by(_tools(meta, functions), "name")
        self.listings.put(_caller(principal), tools)
        return tools

    async def of(self, principal: Principal) -> Mapping[str, Any]:
        """The input schemas by tool name of the caller's kept listing (listing first when none is kept)."""
        schemas = self.listings.schemas(_caller(principal))
        if schemas is None:
            await self.modern_listing(principal)
            schemas = self.listings.schemas(_caller(principal)) or {}
        return schemas


def build_server(watcher: ListChangedWatcher, hub: ChangeHub | None = None,  # noqa: C901 - one handler per MCP method, registered together
                 schemas: CallSchemas | None = None) -> Server[Any]:
    """The one MCP server of this process; identity comes from each request's principal. `schemas` keeps the
    listings a 2026 call's Mcp-Param-* check reads (the ASGI layer sets them per request: `call_schemas`)."""

    kept = schemas or CallSchemas()  # a 2026 call's Mcp-Param-* check (gateway.modern)

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        principal = principal_of(ctx)
        if modern.is_modern(ctx):  # cache hints, and one order whatever the toolset's assembly did
            resolving = modern.resolves_call_schema(getattr(ctx.request, "headers", None))
            listed = kept.listings.get(_caller(principal)) if resolving else None
            tools = listed if listed is not None else await kept.modern_listing(principal)
            return types.ListToolsResult(tools=tools, **modern.list_hints())
        # A 2025 session lists what search found in it too.
        session_id = getattr(_connection(ctx), "session_id", None)
        meta, functions, fingerprint = await db(_visible_listing, principal, session_id)
        watcher.watch(_connection(ctx), principal, fingerprint)
        return types.ListToolsResult(tools=_tools(meta, functions))

    async def listing_fingerprint(principal: Principal) -> str:
        # A listen stream outlives its message: each check reads the generations afresh, never the memo of the
        # message that opened it (which would hide every change after it).
        try:
            with message_generations(None):
                return await db(service.fingerprint, principal)
        except NotFound:
            return ""

    async def discover(ctx: ServerRequestContext[Any, Any], params: types.RequestParams | None
                       ) -> types.DiscoverResult:
        """What this agent's gateway serves a 2026-07-28 client (the handshake era answers `initialize`)."""
        principal = principal_of(ctx)
        return types.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS),
            capabilities=server.get_capabilities(protocol_version=ctx.protocol_version),
            instructions=principal.agent.description or None, **modern.list_hints())

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
                        ) -> types.CallToolResult | types.InputRequiredResult | Wire:
        if not tracing.enabled():
            return await _call_tool(ctx, params)
        # The handler runs in the session's task: its span hangs under this message's HTTP request span.
        parent = getattr(ctx.request, "scope", {}).get(TRACE_KEY) if ctx.request is not None else None
        with tracing.span(f"tools/call {params.name}", {"mcp.method.name": "tools/call",
                                                        "gen_ai.tool.name": params.name}, context=parent):
            return await _call_tool(ctx, params)

    async def _call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
                         ) -> types.CallToolResult | types.InputRequiredResult | Wire:
        principal = principal_of(ctx)
        arguments = dict(params.arguments or {})
        if params.name in search.META_NAMES:  # search_functions answers here; `call` runs the function it names
            answered, name, arguments = await db(search.intercept, principal, params.name, arguments)
            if answered is not None:
                if params.name == search.SEARCH and not modern.is_modern(ctx):
                    await _list_found(ctx, search.found_names(answered))
                return types.CallToolResult.model_validate(answered)
            # The named function in place of `call`, keeping the rest (a 2026 retry's answers and requestState).
            params = params.model_copy(update={"name": name, "arguments": arguments})
        if modern.is_modern(ctx) and (approval_id := modern.approval_of(params)) is not None:
            resumed = await _resume(ctx, principal, params, arguments, approval_id)
            if resumed is not None:
                return resumed
        try:
            if modern.is_modern(ctx):
                ran = await _relayed(ctx, principal, params, arguments)
                if isinstance(ran, types.InputRequiredResult):
                    return ran  # the upstream server asked: the question rides this result
                outcome, rendered = ran
            else:
                outcome, rendered = await db(_call, principal, params.name, arguments, _progress_forwarder(ctx),
                                             _client_requests(ctx), _base_url(ctx))
        except service.Refusal as refusal:
            raise Refused(refusal) from None
        if rendered is not None:
            link = outcome.result.meta.get(service.AUTHORIZE_URL)
            if link and _may_elicit_url(ctx):
                raise _connect_first(params.name, str(link))
            page = outcome.result.meta.get(service.CONNECTIONS_URL)
            if page and _may_elicit_url(ctx):
                raise _keys_first(params.name, str(page), outcome.call_id)
            return _for_wire(ctx, rendered)
        if not (_may_elicit(ctx) and await db(service.self_approval_allowed, principal, outcome.approval_id)):
            return _pending(ctx, outcome)
        shown = await db(service.redacted_arguments, principal, outcome.function, arguments)
        if modern.is_modern(ctx):
            # No server-to-client request on this wire: the question rides the result, the answer the retry.
            assert outcome.approval_id is not None
            return modern.ask_approval(outcome.approval_id, _elicitation_message(principal, outcome, shown),
                                       APPROVE_SCHEMA)
        answer = None
        try:
            # The answer must come back to this process; if it never does (a balancer that is not sticky
            # on the session, a client that never answers), the approval waits for a decision elsewhere.
            with anyio.move_on_after(float(settings.TOOLHUB_MCP_ELICIT_TIMEOUT_S)):
                answer = await ctx.session.elicit_form(
                    message=_elicitation_message(principal, outcome, shown),
                    requested_schema=APPROVE_SCHEMA,
                    related_request_id=ctx.request_id,
                )
        except NoBackChannelError:  # stateless mode: no way back to the client
            answer = None
        return await _answered(ctx, principal, outcome, answer)

    async def _relayed(ctx: ServerRequestContext[Any, Any], principal: Principal,
                       params: types.CallToolRequestParams, arguments: dict[str, Any]
                       ) -> tuple[CallOutcome, Wire | None] | types.InputRequiredResult:
        """A 2026-07-28 call: its result, or an upstream server's question as an input request; a retry carrying
        the answer resumes the call this process holds (agents_app.gateway.relay)."""
        ran: tuple[CallOutcome, Wire | None] | types.InputRequiredResult = await _relaying(
            ctx, principal, params, lambda asks, continuing: db(
                _call, principal, params.name, arguments, _progress_forwarder(ctx), asks, _base_url(ctx), continuing),
            stateless=True)
        if isinstance(ran, types.InputRequiredResult):
            return ran
        return settled(ran)

    async def _relaying(ctx: ServerRequestContext[Any, Any], principal: Principal, params: Any,
                        job: Callable[[ClientRequests, int | None], Awaitable[Any]], *, stateless: bool = False
                        ) -> Any:
        """A 2026-07-28 request whose upstream may ask (tools/call, prompts/get, resources/read): `job`'s answer, or
        a 2025 upstream's question as an input request, whose retry resumes the job this process holds. With
        `stateless`, a 2026 upstream's questions end the job instead (its answer carries them, for relay.hand_back)
        and a retry naming such a round re-issues the job with the client's answers, on any process
        (agents_app.gateway.relay); `job` is also told the audit row of the call such a retry continues (counted and
        audited once: relay.continued_call)."""
        owner = f"{principal.tenant.pk}:{principal.user.pk}:{principal.agent.pk}"
        if relay.relay_of(params) is not None:
            try:
                held = relay.resume(params, owner)
            except relay.RelayRefused as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc),
                               data={"code": exc.code, "reason": exc.reason}) from None
        else:
            resume = (relay.stateless_of(params) or Resume()) if stateless else None
            continuing = await db(relay.continued_call, params) if resume is not None and resume.resumed else None
            plain = _client_requests(ctx, None, resume)
            if plain.elicit is None and plain.sample is None:
                # The client declared neither elicitation nor sampling: nothing can be put to it mid-call (a 2025
                # upstream's question is declined with the reason, a 2026 upstream's is answered by Toolhub or ends
                # the call as a refusal), so there is no question to relay and no call to hold: the job is awaited
                # as is, without a Relay, its queue and the two tasks it waits on.
                return await job(plain, continuing)
            held = relay.Relay(asyncio.get_running_loop())
            held.owner = owner
            held.start(job(_client_requests(ctx, held, resume), continuing))
        return await held.next()


    async def _answered(ctx: ServerRequestContext[Any, Any], principal: Principal, outcome: CallOutcome,
                        answer: types.ElicitResult | None) -> types.CallToolResult | Wire:
        """The person's answer to the approval question (either era): accepting runs the call once."""
        if answer is None or answer.action == "cancel":
            return _pending(ctx, outcome)
        approve = answer.action == "accept" and bool((answer.content or {}).get("approve"))
        decided = await db(service.decide_and_run, principal, outcome, approve=approve)
        if decided is None:
            return _pending(ctx, outcome)
        return _for_wire(ctx, await db(_rendered, principal, decided))

    async def _resume(ctx: ServerRequestContext[Any, Any], principal: Principal,
                      params: types.CallToolRequestParams, arguments: dict[str, Any], approval_id: int
                      ) -> types.CallToolResult | types.InputRequiredResult | Wire | None:
        """A 2026-07-28 client's retry of a call held for approval, its requestState naming the approval: the
        answer decides it. None when that request is no longer pending (decided in Toolhub meanwhile, expired):
        the call then goes its ordinary way (an approved run is handed over, a new request is held)."""
        outcome = await db(service.held_outcome, principal, params.name, arguments, approval_id)
        if outcome is None:
            return None
        if not await db(service.self_approval_allowed, principal, approval_id):
            return _pending(ctx, outcome)
        answer = modern.approval_answer(params)
        if answer is None:  # retried without answering: the question stands
            shown = await db(service.redacted_arguments, principal, outcome.function, arguments)
            return modern.ask_approval(approval_id, _elicitation_message(principal, outcome, shown), APPROVE_SCHEMA)
        return await _answered(ctx, principal, outcome, answer)

    async def list_prompts(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
                           ) -> types.ListPromptsResult:
        prompts = await db(service.list_prompts, principal_of(ctx))
        if modern.is_modern(ctx):
            return types.ListPromptsResult.model_validate(
                {"prompts": modern.sorted_by(prompts, "name"), **modern.wire_hints()})
        return types.ListPromptsResult.model_validate({"prompts": prompts})

    async def get_prompt(ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult | types.InputRequiredResult:
        principal = principal_of(ctx)
        try:
            if modern.is_modern(ctx):  # the upstream's question rides an input_required result
                got = await _relaying(ctx, principal, params, lambda asks, continuing: db(
                    service.get_prompt, principal, params.name, params.arguments, client_requests=asks,
                    continuing=continuing), stateless=True)
                if isinstance(got, types.InputRequiredResult):
                    return got
                if INPUT_REQUIRED in got:  # a 2026 upstream asked: its state rides ours (relay.hand_back)
                    return relay.hand_back(got[INPUT_REQUIRED], got.get(service.CALL))
            else:
                got = await db(service.get_prompt, principal, params.name, params.arguments,
                               client_requests=_client_requests(ctx))
        except NotFound:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt {params.name!r}") from None
        except service.Refusal as refusal:
            raise _refused(refusal) from None
        return types.GetPromptResult.model_validate(got)

    async def list_resources(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        resources = await db(service.list_resources, principal_of(ctx))
        if modern.is_modern(ctx):
            return types.ListResourcesResult.model_validate(
                {"resources": modern.sorted_by(resources, "uri"), **modern.wire_hints()})
        return types.ListResourcesResult.model_validate({"resources": resources})

    async def read_resource(ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult | types.InputRequiredResult:
        principal = principal_of(ctx)
        try:
            if modern.is_modern(ctx):  # the upstream's question rides an input_required result
                got = await _relaying(ctx, principal, params, lambda asks, continuing: db(
                    service.read_resource, principal, str(params.uri), client_requests=asks, continuing=continuing),
                    stateless=True)
                if isinstance(got, types.InputRequiredResult):
                    return got
                if INPUT_REQUIRED in got:  # a 2026 upstream asked: its state rides ours (relay.hand_back)
                    return relay.hand_back(got[INPUT_REQUIRED], got.get(service.CALL))
            else:
                got = await db(service.read_resource, principal, str(params.uri), client_requests=_client_requests(ctx))
        except NotFound:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {params.uri}") from None
        except service.Refusal as refusal:
            raise _refused(refusal) from None
        return types.ReadResourceResult.model_validate(got)

    # call_tool answers a wire dict where it renders a result (Wire): the runner serializes a dict as it does a model.
    server: Server[Any] = Server("toolhub", version=SERVER_VERSION, on_list_tools=list_tools,
                                 on_call_tool=cast(Any, call_tool),
                                 on_list_prompts=list_prompts, on_get_prompt=get_prompt,
                                 on_list_resources=list_resources, on_read_resource=read_resource,
                                 on_subscriptions_listen=(None if hub is None else
                                                          ListenHandler(hub, principal_of, listing_fingerprint)))
    server.get_tool_input_schema = tool_input_schema
    server.add_request_handler("server/discover", types.RequestParams, discover)
    server.middleware.append(_MessageScope())
    server.middleware.append(_IdentityMiddleware(watcher))
    # 2026-07-28: requestState sealed on the way out, verified and opened on the way in (a refusal typed).
    server.middleware.append(modern.TypedStateRefusal())
    server.middleware.append(modern.state_boundary(_principal_or_none))
    return server


class _MessageScope:
    """Every handler's db() jobs share its HTTP message's generation reads (GENERATIONS_KEY); a message without
    one (an SSE post) reads per hop."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        memo = getattr(ctx.request, "scope", {}).get(GENERATIONS_KEY) if ctx.request is not None else None
        with message_generations(memo if isinstance(memo, dict) else None):
            return await call_next(ctx)


class _IdentityMiddleware:
    """Answers `initialize` as `toolhub/<agent name>` with the agent's description as instructions."""

    def __init__(self, watcher: ListChangedWatcher) -> None:
        self.watcher = watcher

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "initialize" and not modern.is_modern(ctx):
            sessions.note_connection(_connection(ctx))  # a session the fast path may answer (gateway.fastcall)
        result = await call_next(ctx)
        if modern.is_modern(ctx) and isinstance(result, dict):
            # The 2026-07-28 stamp of every result names this agent's gateway, as `initialize` does.
            principal = _principal_or_none(ctx)
            if principal is not None:
                stamp = {"name": f"toolhub/{principal.agent.name}", "version": SERVER_VERSION}
                result["_meta"] = {**(result.get("_meta") or {}), modern.SERVER_INFO_META_KEY: stamp}
            return result
        if ctx.method != "initialize" or not isinstance(result, dict):
            return result
        principal = principal_of(ctx)
        info = dict(result.get("serverInfo") or {})
        info["name"] = f"toolhub/{principal.agent.name}"
        info["version"] = SERVER_VERSION
        info.pop("description", None)
        result["serverInfo"] = info
        if principal.agent.description:
            result["instructions"] = principal.agent.description
        else:
            result.pop("instructions", None)
        capabilities = dict(result.get("capabilities") or {})
        capabilities["tools"] = {"listChanged": True}
        result["capabilities"] = capabilities
        try:
            fingerprint = await db(service.fingerprint, principal)
        except NotFound:
            fingerprint = None
        connection = _connection(ctx)
        self.watcher.watch(connection, principal, fingerprint)
        user = getattr(ctx.request, "scope", {}).get("user") if ctx.request is not None else None
        session_id = getattr(connection, "session_id", None)
        if session_id and isinstance(user, AuthenticatedUser):
            counted = getattr(ctx.request, "scope", {}).get(COUNTED_KEY) or {}
            await db(sessions.remember, session_id=session_id, owner=dict(authorization_context(user)),
                     protocol_version=str(result.get("protocolVersion") or ""), client_params=dict(ctx.params or {}),
                     counted=tuple(counted.values()))
        return result
