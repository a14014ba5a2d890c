"""The gateway as an ASGI app: `/mcp/<tenant-slug>/agents/<agent-id>/` (streamable HTTP) and `.../sse`.

Every HTTP request is authenticated (`Authorization: Bearer <API token or OAuth access token>`, else 401 with
WWW-Authenticate naming the agent's protected resource metadata, RFC 9728)
and resolved to a tenant membership and an agent (else one 404 for every reason) before the MCP SDK's
transport sees it. Sessions are bound to the credential and the agent that opened them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import weakref
from collections import Counter
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.sse import SseServerTransport
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from agents_app.gateway import resource as oauth_resource
from agents_app.gateway import routing, service, sessions
from agents_app.gateway.fastcall import FastCalls
from agents_app.gateway.listen import ChangeHub
from agents_app.gateway.server import (
    COUNTED_KEY,
    GENERATIONS_KEY,
    PRINCIPAL_KEY,
    TRACE_KEY,
    CallSchemas,
    ListChangedWatcher,
    ServiceUnavailable,
    build_server,
    call_schemas,
    db,
    message_generations,
)
from agents_app.gateway.sessions import SharedSessionManager
from core import hotcache, tracing
from core.codes import ApiCode, error_body
from core.errors import NotFound
from core.exceptions import unavailable_service
from tools_app import pool_broadcast

logger = logging.getLogger(__name__)

PREFIX = "/mcp/"
SSE_PREFIX = "sse:"
PATH_RE = re.compile(r"^/mcp/(?P<slug>[a-z0-9][a-z0-9-]{0,63})/agents/(?P<agent>[0-9]{1,18})(?P<rest>/|/sse/?|/messages/?)?$")
REALM = 'Bearer realm="toolhub"'


async def _json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
                ) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": payload})


async def _drain(receive: Receive, scope: Scope) -> None:
    """Read a refused request's body so the server can reuse the connection."""
    if scope.get("method") not in ("POST", "PUT", "PATCH", "DELETE"):
        return
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return


def not_found_body() -> dict[str, Any]:
    error = NotFound()
    return error_body(error.code, error.message)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _allowed_hosts() -> list[str]:
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:  # as Django does
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return allowed


def _host_allowed(host: str) -> bool:
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, _allowed_hosts())


def _origin_allowed(origin: str) -> bool:
    """The site's own origins: the public URL's, any on a host of ALLOWED_HOSTS, or one of CSRF_TRUSTED_ORIGINS."""
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        return False  # "null" (sandboxed frames, file pages), or no origin at all
    own = f"{parts.scheme}://{parts.netloc}".lower()
    public = str(settings.TOOLHUB_PUBLIC_URL or "")
    trusted = {o.rstrip("/").lower() for o in settings.CSRF_TRUSTED_ORIGINS if "*" not in o}
    if public:
        site = urlsplit(public)
        trusted.add(f"{site.scheme}://{site.netloc}".lower())
    return own in trusted or _host_allowed(parts.netloc)


async def _refuse_foreign(scope: Scope, receive: Receive, send: Send) -> bool:
    """Refuse a request for another host name (DNS rebinding) or from a foreign web page's Origin, as the MCP
    spec asks of streamable HTTP servers, before anything else looks at it. True when it was refused."""
    host = _header(scope, b"x-forwarded-host") if settings.USE_X_FORWARDED_HOST else None
    host = (host or _header(scope, b"host") or "").split(",")[0].strip()
    if not _host_allowed(host):
        await _drain(receive, scope)
        # The host is not echoed: it is whatever the request made up.
        await _json(send, 400, error_body(ApiCode.DISALLOWED_HOST, "this host name is not served here (ALLOWED_HOSTS)"))
        return True
    origin = _header(scope, b"origin")
    if origin is not None and not _origin_allowed(origin):
        await _drain(receive, scope)
        await _json(send, 403, error_body(ApiCode.FORBIDDEN_ORIGIN, "requests from this Origin are refused: only "
                                          "this site's own origins may call the gateway from a browser"))
        return True
    return False


def _public_base(scope: Scope) -> str:
    """TOOLHUB_PUBLIC_URL, else the request's own origin (its host was checked by _refuse_foreign)."""
    configured = str(settings.TOOLHUB_PUBLIC_URL or "").strip()
    if configured:
        return configured.rstrip("/")
    host = _header(scope, b"x-forwarded-host") if settings.USE_X_FORWARDED_HOST else None
    host = (host or _header(scope, b"host") or "").split(",")[0].strip()
    return f"{scope.get('scheme', 'http')}://{host}"


def challenge(scope: Scope, slug: str, agent_id: str, error: str | None = None) -> str:
    """The 401's WWW-Authenticate: where this agent's resource metadata is, hence its authorization server."""
    metadata = oauth_resource.metadata_url(_public_base(scope), slug, agent_id)
    header = f'{REALM}, resource_metadata="{metadata}", scope="{oauth_resource.SCOPE}"'
    return f'{header}, error="{error}"' if error else header


def is_modern_request(scope: Scope) -> bool:
    """A 2026-07-28 request (the SDK routes a version header outside the handshake era to its modern entry): a
    self-contained POST that opens no session and so counts against no session cap."""
    version = _header(scope, b"mcp-protocol-version")
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credential = cast(bytes, value).decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credential.strip():
                return credential.strip()
            return ""
    return None


class GatewayApp:
    """The process's gateway: one MCP server, one streamable-HTTP session manager, one SSE transport."""

    def __init__(self, *, stateless: bool | None = None, watch_interval_s: float | None = None) -> None:
        self.stateless = bool(settings.TOOLHUB_MCP_STATELESS if stateless is None else stateless)
        self.watcher = ListChangedWatcher(
            float(settings.TOOLHUB_MCP_WATCH_S if watch_interval_s is None else watch_interval_s))
        self.hub = ChangeHub()  # subscriptions/listen streams hear committed changes (agents_app.gateway.listen)
        self.schemas = CallSchemas()  # a 2026 tools/call's Mcp-Param-* check reads its caller's kept listing
        self.server = build_server(self.watcher, self.hub, self.schemas)
        self.manager = SharedSessionManager(
            app=self.server, stateless=self.stateless, json_response=False,
            session_idle_timeout=None if self.stateless else float(settings.TOOLHUB_MCP_SESSION_IDLE_S),
        )
        # A warm plain tools/call answered without the SDK's server machinery (TOOLHUB_MCP_FASTCALL).
        self.fast = self.manager.fast = FastCalls(self.server)
        if not self.stateless:
            # Session records live in Redis; after a restart that lost them, write this process's again.
            manager = weakref.ref(self.manager)

            def record_again() -> None:
                if (alive := manager()) is not None:
                    sessions.record_again(alive.live_sessions())

            pool_broadcast.on_reconnect(record_again)
        self.sse = SseServerTransport("/messages/")
        # Sessions this process opened, by id, with the caps they count under (agents_app.gateway.sessions), and
        # the new-session requests in flight per cap: exact here, whatever the shared index has seen yet.
        self._opened: dict[str, tuple[str, ...]] = {}
        self._opening: Counter[str] = Counter()
        self.local_cache = service.shared_cache_is_local()
        self._started: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the session manager and the list_changed watcher (once; also on the first request)."""
        if self._started is not None and self._started.is_set():
            return  # every request asks: started already, without taking the lock
        async with self._start_lock:
            if self._runner is not None:
                return
            self._started, self._stop = asyncio.Event(), asyncio.Event()
            self.hub.start(asyncio.get_running_loop())
            self._runner = asyncio.get_running_loop().create_task(self._run())
        await self._started.wait()

    async def _run(self) -> None:
        assert self._started is not None and self._stop is not None
        async with self.manager.run(), anyio.create_task_group() as tg:
            tg.start_soon(self.watcher.run)
            self._started.set()
            await self._stop.wait()
            tg.cancel_scope.cancel()

    async def stop(self) -> None:
        if self._runner is None or self._stop is None:
            return
        self._stop.set()
        self.hub.stop()
        try:
            await asyncio.wait_for(self._runner, timeout=10)
        except (TimeoutError, asyncio.CancelledError):
            self._runner.cancel()

    async def lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as exc:  # noqa: BLE001 - reported to the server, which refuses to start
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ---- requests --------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if not tracing.enabled():
            await self._guarded(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        with tracing.span(f"MCP {scope.get('method', '')}", {"http.request.method": scope.get("method"),
                                                             "url.path": scope["path"]},
                          kind="server", context=tracing.extract(headers)):
            await self._guarded({**scope, TRACE_KEY: tracing.current_context()}, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A restart of PostgreSQL or Redis answers 503 `service_unavailable` with Retry-After, as the API
        does, not a 500 page; once a response has started there is nothing left to say it with."""
        started = False
        body_read = scope.get("method") not in ("POST", "PUT", "PATCH", "DELETE")

        async def tracked(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        async def reading() -> Message:
            nonlocal body_read
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                body_read = True
            return message

        try:
            await self._request(scope, reading, tracked)
        except Exception as exc:
            service = exc.service if isinstance(exc, ServiceUnavailable) else unavailable_service(exc)
            if service is None or started:
                raise
            logger.warning("gateway: %s unavailable: %s", service, type(exc).__name__)
            if not body_read:
                await _drain(receive, scope)
            retry = str(ServiceUnavailable.RETRY_AFTER_S).encode()
            typed = exc if isinstance(exc, ServiceUnavailable) else ServiceUnavailable(service)
            await _json(send, 503, error_body(typed.api_code, typed.text,
                                              {"service": service, "retry_after_s": ServiceUnavailable.RETRY_AFTER_S}),
                        [(b"retry-after", retry)])

    async def _request(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await _refuse_foreign(scope, receive, send):
            return
        match = PATH_RE.match(scope["path"])
        if match is None:
            await _drain(receive, scope)
            await _json(send, 404, not_found_body())
            return
        token = _bearer(scope)
        generations: dict[str, int] = {}  # this message's hot-cache reads, shared with its handler (GENERATIONS_KEY)
        try:
            principal = await self._principal(token, match, generations)
        except NotFound:
            await _drain(receive, scope)
            await _json(send, 404, not_found_body())
            return
        if principal is None:
            await _drain(receive, scope)
            header = challenge(scope, match["slug"], match["agent"], None if token is None else "invalid_token")
            message = ("an API token or OAuth access token is required: Authorization: Bearer <token>"
                       if token is None else "the token is invalid, expired, or issued for another resource")
            await _json(send, 401, error_body(ApiCode.NOT_AUTHENTICATED, message),
                        [(b"www-authenticate", header.encode())])
            return
        schemas = None
        if scope.get("method") == "POST" and is_modern_request(scope):
            # Mcp-Method/Mcp-Name answer a viewer's call or a spent throttle before the body is parsed.
            method = _header(scope, b"mcp-method")
            early = routing.early_refusal(principal, method, _header(scope, b"mcp-name"))
            if early is not None:
                await _drain(receive, scope)  # discarded unparsed, so the connection stays reusable
                await _json(send, early.status, early.body(), early.headers)
                return
            if method in ("tools/call", None):
                # The SDK checks a call's Mcp-Param-* headers against the tool's schema as this caller was listed it
                # (server.tool_input_schema): read from the listing kept on the loop, not a tools/list dispatched.
                with message_generations(generations):  # the message's one read of the generations
                    schemas = await self.schemas.of(principal)
        user = principal.user
        await self.start()
        # The session is bound to this credential and this agent: another token or another agent's URL
        # presenting the session id is answered "session not found".
        digest = principal.session_key or (hashlib.sha256(token.encode()).hexdigest() if token else "")
        owner = AccessToken(token=digest, client_id=f"user:{user.pk}/agent:{principal.agent.pk}", scopes=[])
        counted = sessions.caps(token_digest=digest, tenant_id=principal.tenant.pk, user_id=user.pk)
        scope = {**scope, PRINCIPAL_KEY: principal, "user": AuthenticatedUser(owner), COUNTED_KEY: counted,
                 GENERATIONS_KEY: generations}
        with call_schemas(schemas):
            await self._route(scope, receive, send, match, counted)

    async def _principal(self, token: str | None, match: re.Match[str],
                         generations: dict[str, int]) -> service.Principal | None:
        """Who the bearer token acts as for this agent (None: no or no valid token); NotFound for no such agent.
        Its hot-cache reads go into `generations`, the message's, which its handler reads on (GENERATIONS_KEY)."""
        if not token:
            return None
        principal = None
        if self.local_cache:
            # Nothing to wait for: the loop checks the remembered principal itself (no thread hop).
            with hotcache.request_scope(generations):
                principal = service.remembered_principal(token=token, tenant_slug=match["slug"],
                                                         agent_id=match["agent"])
        if principal is None:
            with message_generations(generations):
                principal = await db(service.authenticate_remembering, token=token, tenant_slug=match["slug"],
                                     agent_id=match["agent"])
        return principal

    async def _route(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str],
                     counted: dict[str, str]) -> None:
        """An authenticated request to its transport: streamable HTTP at the agent's URL, legacy SSE under it."""
        rest = (match["rest"] or "/").rstrip("/")
        if rest == "" and self._opens_session(scope):
            await self._admitted(scope, receive, send, counted,
                                 lambda s, r, w: self.manager.handle_request(s, r, w))
        elif rest == "":
            session_id = _header(scope, b"mcp-session-id")
            if (session_id and scope.get("method") != "DELETE" and not sessions.touched_lately(session_id)
                    and not await anyio.to_thread.run_sync(sessions.touch, session_id, counted)):
                await self.manager.end(session_id)  # closed by another process to make room under a cap
            await self.manager.handle_request(scope, receive, send)
        elif rest == "/sse":
            await self._admitted(scope, receive, send, counted, lambda s, r, w: self._sse(s, r, w, match))
        else:
            await self.sse.handle_post_message(scope, receive, send)

    # ---- caps on open sessions -------------------------------------------------------------------

    def _opens_session(self, scope: Scope) -> bool:
        """A streamable-HTTP POST without a session id: the handshake of a new session (anything else the SDK
        refuses, after this count)."""
        return (not self.stateless and scope.get("method") == "POST" and _header(scope, b"mcp-session-id") is None
                and not is_modern_request(scope))

    async def _make_room(self, counted: dict[str, str]) -> tuple[str, int, int] | None:
        """Close the least recently used sessions of a cap the new session would pass (on every process: the
        one serving each ends it at its next request). (per, limit, open) when room cannot be made: only when
        what fills the cap is SSE streams held open right now, or sessions still opening."""
        for per, limit in sessions.cap_limits().items():
            cap = counted[per]
            listed = await anyio.to_thread.run_sync(sessions.open_sessions, cap)
            streams = sum(1 for s, caps in self._opened.items() if s.startswith(SSE_PREFIX) and cap in caps)
            opened = len(listed) + streams + self._opening[cap]
            excess = opened - limit + 1
            if excess <= 0:
                continue
            closing = [session_id for session_id, _used in listed[:excess]]
            for session_id in closing:
                await anyio.to_thread.run_sync(sessions.close, session_id)
                await self.manager.end(session_id)
            logger.info("gateway: %d least recently used session(s) closed to make room under the %s cap (%d)",
                        len(closing), per, limit)
            if len(closing) < excess:
                return per, limit, opened - len(closing)
        return None

    async def _admitted(self, scope: Scope, receive: Receive, send: Send, counted: dict[str, str],
                        handle: Any) -> None:
        """Open a session (streamable HTTP or SSE), closing the least recently used ones of its token or member
        at the cap (clients that reconnect without ending the old session are never locked out)."""
        over = await self._make_room(counted)
        if over is not None:
            per, limit, opened = over
            await _drain(receive, scope)
            whose = "API token" if per == "token" else "member of this tenant"
            await _json(send, 429, error_body(ApiCode.TOO_MANY_SESSIONS, (
                f"this {whose} holds {opened} open MCP sessions (the limit is {limit}, "
                f"TOOLHUB_MCP_MAX_SESSIONS_PER_{per.upper()}) and none can be closed to make room: they are SSE "
                "streams open right now or sessions still opening; close an SSE stream or retry shortly"),
                {"limit": limit, "per": per, "open": opened}), [(b"retry-after", b"2")])
            return
        caps = tuple(counted.values())
        for cap in caps:
            self._opening[cap] += 1
        sse_id = f"{SSE_PREFIX}{id(scope)}"

        async def noting(message: Message) -> None:
            # A streamable-HTTP session is counted in the shared index (sessions.remember); an SSE stream only
            # lives as long as this request, here.
            if (message["type"] == "http.response.start" and scope["path"].rstrip("/").endswith("/sse")
                    and message.get("status") == 200):
                self._opened[sse_id] = caps
            await send(message)

        try:
            await handle(scope, receive, noting)
        finally:
            for cap in caps:
                self._opening[cap] -= 1
            self._opened.pop(sse_id, None)  # an SSE session lasts as long as its stream

    async def _sse(self, scope: Scope, receive: Receive, send: Send, match: re.Match[str]) -> None:
        if scope["method"] != "GET":
            await _drain(receive, scope)
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"GET")]})
            await send({"type": "http.response.body", "body": b""})
            return
        # The endpoint event points the client at /mcp/<slug>/agents/<id>/messages/?session_id=...
        scope = {**scope, "root_path": f"/mcp/{match['slug']}/agents/{match['agent']}"}
        async with self.sse.connect_sse(scope, receive, send) as (read_stream, write_stream):
            options = self.server.create_initialization_options(NotificationOptions(tools_changed=True))
            await self.server.run(read_stream, write_stream, options)
