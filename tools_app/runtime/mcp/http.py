"""REMOTE transports: SDK streamable HTTP / SSE clients over an httpx2 client bound to the outbound guard."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import anyio
import httpx2
import mcp_types as types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import MCP_METHOD_HEADER

from core.outbound import GuardedAsyncTransport, OutboundPolicy, check_url, safe_url
from tools_app.runtime.errors import (
    AuthorizationNeeded,
    OutboundBlocked,
    RemoteHTTPError,
    RuntimeToolError,
    ToolTimeout,
)
from tools_app.runtime.mcp.spec import RemoteSpec

# An SSE stream may stay quiet for long; the session's own request timeouts bound each call.
SSE_READ_TIMEOUT_S = 300.0


@dataclass
class HttpChannel:
    """What the HTTP transport observed: the first failure worth reporting instead of the SDK's stand-in."""

    url: str
    failure: RuntimeToolError | None = None
    # The legacy SSE stream ended (the server restarted or went away): nothing sent on it can be answered.
    stream_ended: bool = False
    # POSTs begun on this session: a call that failed with none begun since it started never left Toolhub.
    posts: int = 0
    # The session speaks 2026-07-28: a JSON-RPC error may come with a 4xx status, and is an answer like any other.
    modern: bool = False
    # The streamable HTTP session's client (guard, recording, auth, configured headers): a 2026 call's one POST
    # (post.OnePost) goes out on it too. None for the legacy SSE transport.
    client: httpx2.AsyncClient | None = None

    # The tasks awaiting on this channel (Connection._watched): a recorded failure cancels them at once.
    watching: set[asyncio.Future[Any]] = field(default_factory=set)

    def record(self, error: RuntimeToolError) -> None:
        if self.failure is None:
            self.failure = error
            for task in list(self.watching):
                task.cancel()


class RecordingTransport(GuardedAsyncTransport):
    """The outbound guard, plus: redirects re-checked up front, HTTP error statuses recorded (never headers)."""

    def __init__(self, policy: OutboundPolicy, channel: HttpChannel, *, optional_get: bool = False,
                 token_auth: bool = False, **kwargs: Any) -> None:
        super().__init__(policy, **kwargs)
        self.channel = channel
        # With OAuth a 401 is TokenAuth's to judge (it refreshes and retries first).
        self.token_auth = token_auth
        # Streamable HTTP's GET stream is optional (a server may answer 405): its status is no failure.
        self.optional_get = optional_get

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            self.channel.posts += 1
        try:
            response = await super().handle_async_request(request)
        except OutboundBlocked as exc:
            self.channel.record(exc)
            raise
        except httpx2.TimeoutException:
            self.channel.record(ToolTimeout(f"{request.method} {safe_url(str(request.url))} timed out"))
            raise
        except httpx2.HTTPError as exc:
            self.channel.record(
                RemoteHTTPError(f"{request.method} {safe_url(str(request.url))} failed: {type(exc).__name__}")
            )
            raise
        status = response.status_code
        if 300 <= status < 400 and "location" in response.headers:
            target = urljoin(str(request.url), response.headers["location"])
            try:
                check_url(target, self.policy)
            except OutboundBlocked as exc:
                await response.aclose()
                blocked = OutboundBlocked(
                    f"redirect from {safe_url(str(request.url))} to {safe_url(target)} refused: {exc.message}",
                    details=exc.details,
                )
                self.channel.record(blocked)
                raise blocked from None
        elif (status >= 400 and request.method != "DELETE" and not (self.optional_get and request.method == "GET")
              and not (status == 401 and self.token_auth)
              # A refused server/discover is how a 2025 server answers the probe: the SDK falls back to initialize,
              # whose own answer counts.
              and request.headers.get(MCP_METHOD_HEADER) != "server/discover"
              and not await self._answered_in_jsonrpc(response)):
            self.channel.record(status_failure(request.method, str(request.url), status,
                                               response.headers.get("www-authenticate", "")))
        return response


    async def _answered_in_jsonrpc(self, response: httpx2.Response) -> bool:
        """A 4xx whose body is a JSON-RPC error the SDK reports as that error: -32022 (the server speaks other
        revisions, which it names; the status alone would hide them), or any error of a 2026-07-28 session, where
        the status only mirrors the error code."""
        if not may_answer_in_jsonrpc(response.status_code, response.headers.get("content-type", "")):
            return False
        body = await response.aread()  # kept on the response: the SDK reads the same bytes again
        return answered_in_jsonrpc(body, modern=self.channel.modern)


def status_failure(method: str, url: str, status: int, www_authenticate: str) -> RemoteHTTPError:
    """What an HTTP error status of an MCP request is reported as (RecordingTransport, rawpost)."""
    message, details = f"{method} {safe_url(url)} answered HTTP {status}", {"status": status}
    if status == 401 and "resource_metadata" in www_authenticate:
        # RFC 9728: the server names its OAuth metadata, so it wants a sign-in, not a static header.
        message += ('; this server asks for OAuth sign-in: set the tool\'s auth to {"type": "oauth2"} '
                    "and Connect it")
        details["oauth"] = True
    return RemoteHTTPError(message, details=details)


def may_answer_in_jsonrpc(status: int, content_type: str) -> bool:
    """A status whose body may be a JSON-RPC error the SDK reports as that error (answered_in_jsonrpc reads it)."""
    return status not in (401, 407) and 400 <= status < 500 and content_type.startswith("application/json")


def answered_in_jsonrpc(body: bytes, *, modern: bool) -> bool:
    """A 4xx body that is a JSON-RPC error answering the request: -32022 (the server speaks other revisions, which
    it names; the status alone would hide them), or any error of a 2026-07-28 session, where the status only
    mirrors the error code."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return False
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return False
    return modern or error["code"] == types.UNSUPPORTED_PROTOCOL_VERSION


class TokenAuth(httpx2.Auth):
    """Bearer auth from the spec's token provider: asked per request, asked again once after a 401.

    The provider touches the database, so it runs in a worker thread, never on the pool's event loop. A
    provider failure is recorded on the channel (so the call reports AUTHORIZATION_REQUIRED, not the SDK's
    stand-in) and the request goes out without a token, which the server refuses.
    """

    def __init__(self, provider: Any, channel: HttpChannel) -> None:
        self.provider = provider
        self.channel = channel

    async def _token(self, stale: str | None) -> str | None:
        try:
            return str(await anyio.to_thread.run_sync(self.provider, stale))
        except RuntimeToolError as exc:
            self.channel.record(exc)
            return None

    async def async_auth_flow(self, request: httpx2.Request) -> Any:
        if request.method == "DELETE":
            # Ending the session is best effort: without a token it goes out bare rather than failing loudly.
            try:
                token: str | None = str(await anyio.to_thread.run_sync(self.provider, None))
            except RuntimeToolError:
                token = None
            if token:
                request.headers["Authorization"] = f"Bearer {token}"
            yield request
            return
        token = await self._token(None)
        if token is None:
            raise self.channel.failure or RemoteHTTPError("no access token")
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            fresh = await self._token(token)
            if fresh is None:
                raise self.channel.failure or RemoteHTTPError("no access token")
            if fresh != token:
                await response.aread()
                request.headers["Authorization"] = f"Bearer {fresh}"
                response = yield request
            if response.status_code == 401:
                self.channel.record(AuthorizationNeeded(
                    f"{safe_url(str(request.url))} refused the access token (HTTP 401): authorize again"))


def _client_factory(policy: OutboundPolicy, channel: HttpChannel, timeout_s: float, *, optional_get: bool,
                    token_auth: bool = False) -> Any:
    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers,
            auth=auth,
            timeout=timeout or httpx2.Timeout(timeout_s, read=SSE_READ_TIMEOUT_S),
            transport=RecordingTransport(policy, channel, optional_get=optional_get, token_auth=token_auth),
            follow_redirects=False,
            trust_env=False,
        )

    return factory


class _EndWatch:
    """The transport's read stream, noting in the channel when it ends (EOF or closed under us).

    Only the read side is wrapped; the SDK's dispatcher reads it with `async with` / `async for` and may
    look at `last_context`, which are passed through.
    """

    def __init__(self, inner: Any, channel: HttpChannel) -> None:
        self._inner = inner
        self._channel = channel

    async def __aenter__(self) -> _EndWatch:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.EndOfStream):
            self._channel.stream_ended = True
            raise

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.ClosedResourceError, anyio.EndOfStream):
            self._channel.stream_ended = True
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@asynccontextmanager
async def http_transport(
    spec: RemoteSpec, policy: OutboundPolicy, channel: HttpChannel
) -> AsyncIterator[tuple[Any, Any]]:
    """Open the configured transport; the URL is guard-checked before any connection is made."""
    check_url(spec.url, policy)
    headers = dict(spec.headers)
    factory = _client_factory(policy, channel, spec.timeout_s, optional_get=spec.transport == "streamable_http",
                              token_auth=spec.token is not None)
    auth = TokenAuth(spec.token, channel) if spec.token is not None else None
    if spec.transport == "sse":
        async with sse_client(
            spec.url,
            headers=headers,
            auth=auth,
            timeout=spec.timeout_s,
            sse_read_timeout=SSE_READ_TIMEOUT_S,
            httpx_client_factory=factory,
        ) as (read_stream, write_stream):
            # A legacy SSE session lives exactly as long as its GET stream: its end is how a restart shows.
            yield _EndWatch(read_stream, channel), write_stream
    else:
        async with factory(headers=headers, auth=auth) as client:
            channel.client = client
            async with streamable_http_client(spec.url, http_client=client) as (read_stream, write_stream):
                yield read_stream, write_stream
