"""The runner's side: an authenticated HTTP endpoint on a private address, hosting the LOCAL servers placed on it.

Web processes and workers send `probe`, `call`, `session` (read-only prompts/resources requests) and `close`; the
runner runs them on its own session pool, so each server key has one process in the whole deployment. Every
request carries `Authorization: Bearer <TOOLHUB_RUNNER_SECRET>`; anything else answers 401 and runs nothing.
A request for a server without a sandbox (an operator's `unsandboxed` tool, or TOOLHUB_LOCAL_SANDBOX=off where the
web process runs) is refused unless the runner's own configuration allows it (TOOLHUB_RUNNER_ALLOW_UNSANDBOXED=on):
whoever holds the secret does not thereby get to run code on the runner's host outside the sandbox.

A call whose caller listens for progress or answers a server's input requests goes to `call-stream`: the answer is
newline-delimited JSON events (`progress`, `ask`, then one `result`), and each `ask` (an elicitation or sampling
request of either MCP era) waits until the caller posts its answer to `answer` (or the call's timeout passes).
A prompts/get or resources/read whose caller answers questions goes to `session-stream` the same way (`ask`
events, then one `answer` or `error`; with stateless rounds, `handed_back` or `stale`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from core.errors import RuntimeToolError
from tools_app.runtime.mcp.client_requests import (
    ClientRequestRefused,
    ClientRequests,
    InputHandedBack,
    InputStateStale,
    Resume,
)
from tools_app.runtime.mcp.pool import SessionPool
from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
from tools_app.runtime.packages.errors import PackageStoreUnavailable
from tools_app.runtime.packages.store import MARKER
from tools_app.runtime.runner.placement import Registry, RunnerInfo, owner
from tools_app.runtime.runner.wire import (
    discovery_to_json,
    encoded,
    error_to_json,
    event_line,
    result_to_json,
    spec_from_json,
)
from tools_app.runtime.sandbox import SandboxUnavailable

# The only session requests a runner serves for others: reads, as the gateway forwards them.
SESSION_METHODS: dict[str, type[Any]] = {
    "list_resources": types.ListResourcesResult,
    "list_resource_templates": types.ListResourceTemplatesResult,
    "read_resource": types.ReadResourceResult,
    "list_prompts": types.ListPromptsResult,
    "get_prompt": types.GetPromptResult,
}

# The session requests whose server may ask for input (either era), served streamed (`session-stream`).
ASKING_METHODS = ("get_prompt", "read_resource")

JSON = "application/json"


def checked_spec(raw: dict[str, Any], *, allow_unsandboxed: bool) -> ServerSpec:
    """The spec a request names, refused when it asks for no sandbox and this runner does not allow that."""
    spec = spec_from_json(raw)
    if isinstance(spec.target, LocalSpec) and spec.target.sandbox is None and not allow_unsandboxed:
        raise SandboxUnavailable(
            "this runner does not run LOCAL servers outside the sandbox; the request asked for none (an "
            "unsandboxed tool, or TOOLHUB_LOCAL_SANDBOX=off). An operator who accepts that allows it on the "
            "runner itself with TOOLHUB_RUNNER_ALLOW_UNSANDBOXED=on",
            details={"tool_id": spec.tool_id, "setting": "TOOLHUB_RUNNER_ALLOW_UNSANDBOXED"},
        )
    if isinstance(spec.target, LocalSpec) and spec.target.sandbox is not None:
        for path in spec.target.sandbox.policy.store_paths:
            if not os.path.isfile(os.path.join(path, MARKER)):
                raise PackageStoreUnavailable(
                    f"this runner does not see the installed package at {path}: every runner must see the package "
                    "store (TOOLHUB_PACKAGE_STORE) at the same path as the web processes and workers that install "
                    "into it (a shared volume; read-only is enough on a runner's host)",
                    details={"tool_id": spec.tool_id, "path": path, "setting": "TOOLHUB_PACKAGE_STORE"},
                )
    return spec


def build_app(pool: SessionPool, secret: str, *, allow_unsandboxed: bool = False) -> RunnerApp:
    """The runner's routes over `pool`; servers without a sandbox run only when `allow_unsandboxed`."""
    if not secret:
        raise ValueError("a runner needs TOOLHUB_RUNNER_SECRET: its transport is authenticated")
    expected = f"Bearer {secret}".encode()

    def sandboxed(raw: dict[str, Any]) -> ServerSpec:
        return checked_spec(raw, allow_unsandboxed=allow_unsandboxed)

    async def guarded(request: Request, handle: Any) -> Response:
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return JSONResponse({"error": {"type": "Unauthorized", "message": "runner secret required"}}, 401)
        body = await request.json() if request.method == "POST" else {}
        try:
            answer = await handle(body)
            return answer if isinstance(answer, Response) else Response(encoded(answer), media_type=JSON)
        except RuntimeToolError as exc:
            return JSONResponse({"error": error_to_json(exc)}, 409)

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        spec = sandboxed(body["spec"])
        result = await pool.acall(spec, str(body["function"]), dict(body.get("arguments") or {}),
                                  body.get("timeout_s"))
        return {"result": result_to_json(result)}

    streams = StreamedCalls(pool, sandboxed)

    async def probe(body: dict[str, Any]) -> dict[str, Any]:
        return {"discovery": discovery_to_json(await pool.aprobe(sandboxed(body["spec"])))}

    async def session(body: dict[str, Any]) -> dict[str, Any]:
        method = str(body.get("method"))
        if method not in SESSION_METHODS:
            raise RuntimeToolError(f"session method {method!r} is not served; accepted: {', '.join(SESSION_METHODS)}")
        spec = sandboxed(body["spec"])
        args, kwargs = list(body.get("args") or []), dict(body.get("kwargs") or {})

        async def op(client: Any) -> Any:
            return await getattr(client, method)(*args, **kwargs)

        found = await anyio.to_thread.run_sync(pool.session_request, spec, op)
        return {"result": found.model_dump(mode="json", by_alias=True, exclude_none=True)}

    async def close(body: dict[str, Any]) -> dict[str, Any]:
        await anyio.to_thread.run_sync(pool.close, int(body["tool_id"]))
        return {"closed": int(body["tool_id"])}

    async def stats(body: dict[str, Any]) -> dict[str, Any]:
        return {"stats": await anyio.to_thread.run_sync(pool.stats)}

    def route(handle: Any) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            return await guarded(request, handle)

        return endpoint

    return RunnerApp({"/v1/call": ("POST", route(call)), "/v1/probe": ("POST", route(probe)),
                      "/v1/session": ("POST", route(session)), "/v1/close": ("POST", route(close)),
                      "/v1/stats": ("GET", route(stats)), "/v1/call-stream": ("POST", route(streams.respond)),
                      "/v1/answer": ("POST", route(streams.answer)),
                      "/v1/session-stream": ("POST", route(streams.respond_session))})


Endpoint = Callable[[Request], Awaitable[Response]]


class RunnerApp:
    """The runner's routes as a bare ASGI app: a path's one method to its endpoint, anything else 404 or 405 (as
    Starlette's router answered). Starlette's router and middleware layers were a fifth of the runner's HTTP thread
    per call, for eight fixed paths; an endpoint's unexpected exception reaches the server, which answers 500."""

    def __init__(self, routes: dict[str, tuple[str, Endpoint]]) -> None:
        self.routes = routes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # nothing to start or stop: the pool belongs to whoever built the app
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        found = self.routes.get(scope["path"])
        response: Response
        if found is None:
            response = PlainTextResponse("Not Found", 404)
        elif scope["method"] != found[0] and (found[0], scope["method"]) != ("GET", "HEAD"):
            response = PlainTextResponse("Method Not Allowed", 405, headers={"Allow": found[0]})
        else:
            response = await found[1](Request(scope, receive))
        await response(scope, receive, send)


class StreamedCalls:
    """Calls whose caller listens: events out as newline-delimited JSON, the caller's answers in through `answer`."""

    def __init__(self, pool: SessionPool, checked: Callable[[dict[str, Any]], ServerSpec]) -> None:
        self.pool = pool
        # The runner's own sandbox rule (checked_spec), applied as for a plain call.
        self.checked = checked
        # Questions put to callers, by id, each waiting in a pool worker thread for the caller's answer.
        self.asks: dict[str, concurrent.futures.Future[dict[str, Any]]] = {}

    def _asker(self, kind: str, emit: Any, bound_s: float) -> Any:
        def ask(params: dict[str, Any]) -> dict[str, Any]:
            ask_id = uuid.uuid4().hex
            answered: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
            self.asks[ask_id] = answered
            try:
                emit({"ask": {"id": ask_id, "kind": kind, "params": params}})
                try:
                    reply = answered.result(timeout=bound_s)
                except concurrent.futures.TimeoutError:
                    raise ClientRequestRefused("declined: nobody answered in time") from None
            finally:
                self.asks.pop(ask_id, None)
            if "refused" in reply:
                raise ClientRequestRefused(str(reply["refused"]))
            return dict(reply.get("answer") or {})

        return ask

    def _requests(self, body: dict[str, Any], emit: Any, bound_s: float) -> ClientRequests:
        """Handlers that put the server's request to the caller through the stream and wait for its answer."""
        offered = dict(body.get("client_requests") or {})
        defaults = ClientRequests()
        return ClientRequests(
            sample=self._asker("sample", emit, bound_s) if offered.get("sample") else None,
            elicit=self._asker("elicit", emit, bound_s) if offered.get("elicit") else None,
            no_sample=str(offered.get("no_sample") or defaults.no_sample),
            no_elicit=str(offered.get("no_elicit") or defaults.no_elicit),
            stateless=Resume.from_json(offered["stateless"]) if isinstance(offered.get("stateless"), dict) else None,
        )

    async def respond(self, body: dict[str, Any]) -> StreamingResponse:
        spec = self.checked(body["spec"])
        timeout = float(body.get("timeout_s") or spec.call_timeout_s)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def emit(event: dict[str, Any]) -> None:  # from the pool's thread or a handler's worker thread
            loop.call_soon_threadsafe(events.put_nowait, event)

        def progress(value: float, total: float | None, message: str | None) -> None:
            emit({"progress": [value, total, message]})

        task = loop.create_task(self.pool.acall(
            spec, str(body["function"]), dict(body.get("arguments") or {}), timeout,
            progress if body.get("progress") else None, self._requests(body, emit, timeout)))
        return self._streamed(task, events, lambda done: {"result": result_to_json(done)})

    async def respond_session(self, body: dict[str, Any]) -> StreamingResponse:
        """A prompts/get or resources/read whose server may ask (either era), streamed as a call is: each question an
        `ask` event the caller answers through `answer`; then one `answer` event (the result) or `error`."""
        method = str(body.get("method"))
        if method not in ASKING_METHODS:
            raise RuntimeToolError(f"session method {method!r} is not served with questions; accepted: "
                                   f"{', '.join(ASKING_METHODS)}")
        spec = self.checked(body["spec"])
        timeout = float(body.get("timeout_s") or spec.call_timeout_s)
        args, kwargs = list(body.get("args") or []), dict(body.get("kwargs") or {})
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def emit(event: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        async def send(session: Any, responses: Any, state: str | None) -> Any:
            return await getattr(session, method)(*args, input_responses=responses, request_state=state,
                                                  allow_input_required=True, **kwargs)

        async def run() -> dict[str, Any]:
            try:
                found = await anyio.to_thread.run_sync(
                    self.pool.asking_request, spec, send, self._requests(body, emit, timeout),
                    str(body.get("what") or method), timeout)
            except RuntimeToolError as exc:
                return {"error": error_to_json(exc)}
            except InputHandedBack as exc:  # stateless rounds: the questions go back to the caller
                return {"handed_back": exc.payload}
            except InputStateStale as exc:
                return {"stale": exc.message}
            except Exception as exc:  # noqa: BLE001 - the server's refusal (or a declined question): its message
                message = getattr(getattr(exc, "error", None), "message", None) or getattr(exc, "message", None)
                return {"error": {"type": type(exc).__name__, "message": str(message or type(exc).__name__),
                                  "details": {}}}
            return {"answer": found.model_dump(mode="json", by_alias=True, exclude_none=True)}

        return self._streamed(loop.create_task(run()), events, lambda done: done)

    def _streamed(self, task: asyncio.Task[Any], events: asyncio.Queue[dict[str, Any]],
                  last: Callable[[Any], dict[str, Any]]) -> StreamingResponse:
        """The events as newline-delimited JSON while `task` runs, then `last(its result)`."""
        loop = asyncio.get_running_loop()

        async def lines() -> AsyncIterator[bytes]:
            try:
                while True:
                    getter = loop.create_task(events.get())
                    await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                    if getter.done():
                        yield event_line(getter.result())
                        continue
                    getter.cancel()
                    while not events.empty():
                        yield event_line(events.get_nowait())
                    break
                yield event_line(last(task.result()))
            finally:
                if not task.done():  # the caller went away: the call is not left running for nobody
                    task.cancel()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        waiting = self.asks.get(str(body.get("id")))
        if waiting is None or waiting.done():
            raise RuntimeToolError("no question with that id is waiting (answered, timed out or never asked)")
        waiting.set_result({k: body[k] for k in ("answer", "refused") if k in body})
        return {"answered": True}


class Heartbeat:
    """Announce this runner in the registry every `interval_s` seconds (default: a third of the registry's TTL)
    until stopped; withdraw it on stop. A beat that failed (Redis restarting) is tried again after RETRY_S, not a
    whole interval later: readers keep a verified announcement only until its signed expiry."""

    RETRY_S = 0.25
    # How long a server whose key another runner owns stays unused before this runner closes it (by default).
    UNOWNED_IDLE_S = 5.0

    def __init__(self, registry: Registry, pool: SessionPool, *, runner_id: str, url: str,
                 interval_s: float | None = None, unowned_idle_s: float | None = None) -> None:
        self.registry, self.pool, self.runner_id, self.url = registry, pool, runner_id, url
        self.interval_s = interval_s or registry.ttl_s / 3
        self.unowned_idle_s = self.UNOWNED_IDLE_S if unowned_idle_s is None else unowned_idle_s
        self.since = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"runner-heartbeat-{runner_id}", daemon=True)

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def beat(self) -> None:
        # Not pool.stats(): that waits for the pool's event loop, which a runner under load keeps busy for seconds,
        # and a beat held that long let the announcement lapse (the key moved, and its server ran on two runners).
        servers = self.pool.open_sessions()
        self.registry.announce(RunnerInfo(id=self.runner_id, url=self.url, servers=servers, since=self.since,
                                          draining=self.registry.draining(self.runner_id, self.since)))
        self.release_unowned()

    def release_unowned(self) -> None:
        """Close this runner's idle servers whose keys another live runner owns now. A key runs on one runner, but
        for a moment a web process may place it on another (this runner restarted and took its keys back, a runner
        stopped draining, an announcement late under load): the server started there meanwhile would sit idle until
        the pool's idle TTL, a second process for one key. Only with this runner among the live ones (a full
        picture), and only servers idle for a while (a web process may still hold the older list for a second)."""
        live = self.registry.runners(max_age_s=0)
        if not any(r.id == self.runner_id for r in live):
            return

        def mine(key: tuple[int, int, str]) -> bool:
            found = owner(f"{key[0]}:{key[1]}", live)
            return found is None or found.id == self.runner_id

        self.pool.retire_idle_unless(mine, idle_s=max(self.unowned_idle_s, 2 * self.interval_s))

    def _run(self) -> None:
        wait_s = self.interval_s
        while not self._stop.wait(wait_s):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - Redis away for a moment: the next beat tries again, soon
                wait_s = min(self.RETRY_S, self.interval_s)
            else:
                wait_s = self.interval_s

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():  # never started when the server could not bind its port
            self._thread.join(5)
        try:
            self.registry.withdraw(self.runner_id)  # and its draining mark
        except Exception:  # noqa: BLE001 - the TTL ends the entry anyway
            pass
