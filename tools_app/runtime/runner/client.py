"""The web and worker side of the runner tier: a pool facade that sends LOCAL work to the key's runner.

REMOTE servers stay in this process's own pool (they are HTTP already). A LOCAL probe, call, read-only session
request or close goes to the runner that owns the server key `(tool_id, config_version)`; when that runner cannot be
reached the registry is read again and the call goes to the key's new owner (a dead runner's servers start again
elsewhere on their next call). A request whose connection the runner's side reset before it read it (a runner killed
with the request still in its socket) ran nothing and goes again the same way; a call the runner was running when it
died fails with the typed RunnerUnavailable. A call whose caller listens for progress or can answer a server's
sampling or elicitation requests (either MCP era) is streamed: progress comes back as it happens, and each question
is put to the caller's handlers here and their answer posted back to the runner, so a LOCAL server behaves as
in-process. A prompts/get or resources/read whose server may ask is streamed the same way.
"""

from __future__ import annotations

import http.client
import json
import select
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx2

from core.codes import ApiCode
from core.outbound import ssl_context
from tools_app.runtime.errors import ConnectionFailed
from tools_app.runtime.mcp.client_requests import (
    ClientRequestRefused,
    ClientRequests,
    InputHandedBack,
    InputStateStale,
)
from tools_app.runtime.mcp.discovery import Discovery
from tools_app.runtime.mcp.pool import SYNC_SLACK_S, SessionPool
from tools_app.runtime.mcp.spec import LocalSpec, ServerSpec
from tools_app.runtime.result import EXECUTION_ERROR, ToolResult
from tools_app.runtime.runner.app import ASKING_METHODS, SESSION_METHODS
from tools_app.runtime.runner.placement import Registry, RunnerInfo, owner
from tools_app.runtime.runner.wire import discovery_from_json, error_from_json, result_from_json, spec_to_json

T = TypeVar("T")


class RunnerUnavailable(ConnectionFailed):
    code = ApiCode.RUNNER_UNAVAILABLE


class _ConnectFailed(Exception):
    """Nobody accepted the connection (refused, unreachable): the runner is not there."""


class _NotDelivered(Exception):
    """The runner's side reset the connection before any answer: its process closed the socket with the request
    still unread in it (killed before it read it, or closing an idle keep-alive connection as the request came).
    The request never reached the runner's code, so it can go again without running twice."""


# How often one request goes again after a reset that proves it unread, before the runner counts as not answering.
_RESENDS = 3


def _unread_reset(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) is the peer's reset of a connection, not its orderly close. Linux resets a
    TCP connection when its owner closes it (or dies) with received data it never read; after reading a request it
    closes in order (EOF: http.client's RemoteDisconnected, itself a ConnectionResetError, is that one)."""
    seen: BaseException | None = exc
    for _ in range(6):  # httpx wraps the socket's error twice (httpcore's, then its own)
        if seen is None:
            return False
        if isinstance(seen, (ConnectionResetError, BrokenPipeError)) and not isinstance(
                seen, http.client.RemoteDisconnected):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# An idle connection older than this is not reused: the runner's server (uvicorn) closes keep-alive connections idle
# for 5 s, and a request sent on a connection it is closing would fail after the call might have been delivered.
_IDLE_REUSE_S = 3.0
_IDLE_PER_RUNNER = 32


def _readable(sock: Any) -> bool:
    """Whether `sock` has something to read (or is closed) now. poll, not select: select refuses a descriptor above
    1023 (ValueError), which a busy process's sockets reach."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class _Transport:
    """Plain HTTP/1.1 keep-alive connections to the runners for the plain (non-streamed) requests: a call's hop costs
    a third of httpx's client-side CPU (measured: 0.33 ms against 0.9-1.1 ms per request on the load machine), and
    two of every three requests of the mixed workload make one. Idle connections are kept per runner URL and shared by
    the process's threads; one is reused only when it is young and the runner has not closed it."""

    def __init__(self, secret: str) -> None:
        self._headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json",
                         "Accept": "application/json"}
        self._idle: dict[str, list[tuple[float, http.client.HTTPConnection]]] = {}
        self._lock = threading.Lock()

    def _take(self, base: str) -> http.client.HTTPConnection | None:
        now = time.monotonic()
        while True:
            with self._lock:
                idle = self._idle.get(base)
                if not idle:
                    return None
                since, conn = idle.pop()
            sock = conn.sock
            # Readable while idle means the runner closed it (or sent what nobody asked for): not reusable.
            if since > now - _IDLE_REUSE_S and sock is not None and not _readable(sock):
                return conn
            conn.close()

    def _give_back(self, base: str, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(base, [])
            if len(idle) < _IDLE_PER_RUNNER:
                idle.append((time.monotonic(), conn))
                return
        conn.close()

    def _drop(self, base: str) -> None:
        """Close every idle connection to `base` (its runner reset one: the others are as stale)."""
        with self._lock:
            idle = self._idle.pop(base, [])
        for _, conn in idle:
            conn.close()

    def post(self, base: str, path: str, body: dict[str, Any], timeout: float, *, fresh: bool = False) -> Any:
        """POST `body` as JSON to `base + path` (on a new connection when `fresh`); the answer's JSON. Raises
        _ConnectFailed when nobody accepts the connection, _NotDelivered when the runner reset it with the request
        unread, OSError or http.client.HTTPException when the exchange fails after that."""
        payload = json.dumps(body, separators=(",", ":")).encode()
        conn = None if fresh else self._take(base)
        if conn is None:
            where = urlsplit(base)
            conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port or 80, timeout=timeout)
            try:
                conn.connect()
            except OSError as exc:
                conn.close()
                raise _ConnectFailed(type(exc).__name__) from None
        else:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
        try:
            conn.request("POST", path, body=payload, headers=self._headers)
            response = conn.getresponse()
        except BaseException as exc:
            conn.close()
            if _unread_reset(exc):  # nothing of an answer came: the runner's process never read the request
                self._drop(base)
                raise _NotDelivered(type(exc).__name__) from None
            raise
        try:
            raw = response.read()
        except BaseException:
            conn.close()
            raise
        if response.will_close:
            conn.close()
        else:
            self._give_back(base, conn)
        try:
            return json.loads(raw)
        except ValueError:  # not the runner's app answering (a proxy's or the server's own error page)
            raise http.client.HTTPException(f"answer {response.status} that is not JSON") from None

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for _, conn in conns:
                conn.close()


class RunnerPool:
    """What `tools_app.wiring.pool.pool()` returns when the deployment has runners (TOOLHUB_RUNNERS=redis)."""

    def __init__(self, local: SessionPool, registry: Registry, secret: str) -> None:
        self.local = local
        self.registry = registry
        # Streamed calls (progress, a server's questions) and their answers go through httpx; plain requests through
        # the lighter keep-alive transport. Runner URLs are plain http, but an announced https one is verified as
        # everywhere else, with the process's one TLS context (httpx2's own loads the CA bundle per client).
        self.client = httpx2.Client(headers={"Authorization": f"Bearer {secret}"}, trust_env=False,
                                    verify=ssl_context())
        self.transport = _Transport(secret)

    # ---- the SessionPool surface the services use ----------------------------------------------------

    def probe(self, spec: ServerSpec) -> Discovery:
        if not isinstance(spec.target, LocalSpec):
            return self.local.probe(spec)
        body = self._post(spec, "/v1/probe", {"spec": spec_to_json(spec)}, spec.startup_timeout_s + SYNC_SLACK_S)
        return discovery_from_json(body["discovery"])

    def call(self, spec: ServerSpec, function: str, arguments: dict[str, Any], timeout_s: float | None = None,
             on_progress: Any = None, client_requests: Any = None) -> ToolResult:
        if not isinstance(spec.target, LocalSpec):
            return self.local.call(spec, function, arguments, timeout_s, on_progress, client_requests)
        timeout = timeout_s or spec.call_timeout_s
        request = {"spec": spec_to_json(spec), "function": function, "arguments": arguments, "timeout_s": timeout}
        answers = client_requests if isinstance(client_requests, ClientRequests) else None
        try:
            if on_progress is not None or (answers is not None and (answers.sample or answers.elicit)):
                return self._call_streamed(spec, request, on_progress, answers,
                                           spec.startup_timeout_s + timeout + SYNC_SLACK_S)
            body = self._post(spec, "/v1/call", request, spec.startup_timeout_s + timeout + SYNC_SLACK_S)
        except RunnerUnavailable as exc:
            # The deployment's outage (no runner announced, e.g. while Redis restarts), not the tool's failure: the
            # result says so, and the tool's breaker does not count it.
            return ToolResult.fail(EXECUTION_ERROR, exc.message, outage=exc.code)
        except ConnectionFailed as exc:
            return ToolResult.fail(EXECUTION_ERROR, exc.message)
        return result_from_json(body["result"])

    def _call_streamed(self, spec: ServerSpec, request: dict[str, Any], on_progress: Any,
                       answers: ClientRequests | None, timeout: float) -> ToolResult:
        """The call as a stream of events from the key's runner: progress passed on, questions answered here."""
        offered = answers or ClientRequests()
        request = {**request, "progress": on_progress is not None, "client_requests": {
            "sample": offered.sample is not None, "elicit": offered.elicit is not None,
            "no_sample": offered.no_sample, "no_elicit": offered.no_elicit,
            # Stateless rounds (a 2026 gateway client): the server's questions come back in the result's meta.
            **({"stateless": offered.stateless.to_json()} if offered.stateless is not None else {})}}
        return result_from_json(self._stream(spec, "/v1/call-stream", request, on_progress, offered, timeout)["result"])

    def _stream(self, spec: ServerSpec, path: str, request: dict[str, Any], on_progress: Any,
                offered: ClientRequests, timeout: float) -> dict[str, Any]:
        """A streamed request to the key's runner: progress passed on, questions put to `offered` here (their
        answers posted back), until the last event (a call's `result`, a session request's `answer` or `error`)."""
        refused: set[str] = set()
        resent = 0
        while True:
            runner = self.owner_of(spec, frozenset(refused))
            answered = False  # the runner's answer began: from here on a failure is a call in flight
            try:
                with self.client.stream("POST", runner.url + path, json=request, timeout=timeout) as response:
                    answered = True
                    if response.status_code != 200:
                        answer = json.loads(response.read() or b"{}")
                        raise error_from_json(answer.get("error") or {"message": f"runner answered {response.status_code}"})
                    for line in response.iter_lines():
                        if not line:
                            continue
                        event = json.loads(line)
                        if event.keys() & {"result", "answer", "error", "handed_back", "stale"}:
                            last: dict[str, Any] = event
                            return last
                        if "progress" in event and on_progress is not None:
                            try:
                                on_progress(*event["progress"])
                            except Exception:  # noqa: BLE001 - a listener's failure must not fail the call
                                pass
                        elif "ask" in event:
                            self._answer(runner.url, spec, event["ask"], offered)
            except httpx2.ConnectError:
                self.registry.forget()  # as in _post: nobody listens there, the key moves to its next owner
                refused.add(runner.id)
                continue
            except httpx2.TransportError as exc:
                if not answered and _unread_reset(exc) and resent < _RESENDS:
                    resent += 1  # as in _post: reset with the request unread, it ran nothing; again, same owner
                    self.registry.forget()
                    continue
                raise RunnerUnavailable(f"the LOCAL server runner {runner.id!r} did not answer: {type(exc).__name__}",
                                        details={"runner": runner.id}) from None
            raise RunnerUnavailable(f"the LOCAL server runner {runner.id!r} ended the call without a result",
                                    details={"runner": runner.id})

    def _answer(self, url: str, spec: ServerSpec, ask: dict[str, Any], offered: ClientRequests) -> None:
        """Put one server question to the caller's handler (they block, as in-process) and post the answer back."""
        handler = offered.sample if ask.get("kind") == "sample" else offered.elicit
        reply: dict[str, Any] = {"id": ask.get("id")}
        try:
            if handler is None:
                raise ClientRequestRefused(offered.no_sample if ask.get("kind") == "sample" else offered.no_elicit)
            reply["answer"] = handler(dict(ask.get("params") or {}))
        except ClientRequestRefused as exc:
            reply["refused"] = exc.message
        except Exception as exc:  # noqa: BLE001 - a handler's failure is the server's answer, as in-process
            reply["refused"] = f"declined: Toolhub could not answer ({type(exc).__name__})"
        try:
            self.client.post(url + "/v1/answer", json=reply, timeout=spec.call_timeout_s)
        except httpx2.HTTPError:
            pass  # the runner's wait times out and the server is told nobody answered

    def session_request(self, spec: ServerSpec, op: Callable[[Any], Awaitable[T]], timeout_s: float | None = None) -> T:
        if not isinstance(spec.target, LocalSpec):
            return self.local.session_request(spec, op, timeout_s)
        timeout = spec.startup_timeout_s + (timeout_s or spec.call_timeout_s) + SYNC_SLACK_S
        return anyio.run(op, _RemoteSession(self, spec, timeout))

    def asking_request(self, spec: ServerSpec, send: Callable[[Any, Any, str | None], Awaitable[T]],
                       client_requests: ClientRequests, what: str, timeout_s: float | None = None) -> T:
        """As SessionPool.asking_request. For a LOCAL server the request goes to its runner streamed
        (/v1/session-stream): the server's questions (either era) come back here to `client_requests`, as a tool
        call's do by /v1/call-stream. `send` is read once against a recorder for the method and arguments it sends
        (the runner sends it again with the answers)."""
        if not isinstance(spec.target, LocalSpec):
            return self.local.asking_request(spec, send, client_requests, what, timeout_s)
        method, args, kwargs = _recorded(send)
        timeout = timeout_s or spec.call_timeout_s
        offered = client_requests
        request = {"spec": spec_to_json(spec), "method": method, "args": args, "kwargs": kwargs, "what": what,
                   "timeout_s": timeout, "client_requests": {
                       "sample": offered.sample is not None, "elicit": offered.elicit is not None,
                       "no_sample": offered.no_sample, "no_elicit": offered.no_elicit,
                       **({"stateless": offered.stateless.to_json()} if offered.stateless is not None else {})}}
        last = self._stream(spec, "/v1/session-stream", request, None, offered,
                            spec.startup_timeout_s + timeout + SYNC_SLACK_S)
        if "error" in last:
            raise error_from_json(last["error"])
        if "handed_back" in last:
            raise InputHandedBack(last["handed_back"])
        if "stale" in last:
            raise InputStateStale(str(last["stale"]))
        answer: T = SESSION_METHODS[method].model_validate(last["answer"])
        return answer

    def close(self, tool_id: int) -> None:
        self.local.close(tool_id)
        for runner in self.registry.runners(max_age_s=0):
            try:
                self.client.post(runner.url + "/v1/close", json={"tool_id": tool_id}, timeout=30)
            except httpx2.HTTPError:
                continue  # a runner that is gone holds nothing; one that is back started empty

    def close_all(self) -> None:
        self.local.close_all()

    def shutdown(self) -> None:
        self.local.shutdown()
        self.client.close()
        self.transport.close()

    def stats(self) -> dict[str, Any]:
        return {**self.local.stats(), "runners": self.registry.describe(),
                "runner_announcements_rejected": self.registry.rejected}

    # ---- transport -------------------------------------------------------------------------------

    def owner_of(self, spec: ServerSpec, excluded: frozenset[str] = frozenset()) -> RunnerInfo:
        live = [r for r in self.registry.runners() if r.id not in excluded]
        found = owner(f"{spec.tool_id}:{spec.config_version}", live)
        if found is None:
            raise RunnerUnavailable("no LOCAL server runner is live (start `manage.py toolhub_runner`)",
                                    details={"tool_id": spec.tool_id})
        return found

    def _post(self, spec: ServerSpec, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        refused: set[str] = set()
        resent, reset_by = 0, ""
        while True:
            runner = self.owner_of(spec, frozenset(refused))
            try:
                answer: dict[str, Any] = self.transport.post(runner.url, path, body, timeout,
                                                             fresh=runner.id == reset_by)
            except _NotDelivered as exc:
                # Reset with the request unread (a runner killed before it read it, or closing an idle connection
                # as the request came): it ran nothing. Again to the same owner on a new connection: a dead one
                # refuses it (and the key moves on as above), a live one answers; never to two runners at once.
                resent, reset_by = resent + 1, runner.id
                if resent > _RESENDS:
                    raise RunnerUnavailable(f"the LOCAL server runner {runner.id!r} did not answer: {exc}",
                                            details={"runner": runner.id}) from None
                self.registry.forget()
                continue
            except _ConnectFailed:
                # Nobody listens there: a dead runner whose heartbeat has not expired yet. The key goes to its
                # next owner (the one every process picks once the entry expires). A slow runner is not skipped:
                # only a refused connection moves a server, so a key never runs on two runners at once.
                self.registry.forget()
                refused.add(runner.id)
                continue
            except (OSError, http.client.HTTPException) as exc:
                raise RunnerUnavailable(f"the LOCAL server runner {runner.id!r} did not answer: {_named(exc)}",
                                        details={"runner": runner.id}) from None
            if "error" in answer:
                raise error_from_json(answer["error"])
            return answer


class _Recorded(Exception):
    def __init__(self, method: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        super().__init__(method)
        self.method, self.positional, self.keywords = method, args, kwargs


class _Recorder:
    """Stands in for the SDK ClientSession once, to learn which request a `send` makes (nothing is sent)."""

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        async def record(*args: Any, **kwargs: Any) -> Any:
            raise _Recorded(method, list(args), kwargs)

        return record


_SENT_PER_ROUND = ("input_responses", "request_state", "allow_input_required")


def _recorded(send: Callable[[Any, Any, str | None], Awaitable[Any]]) -> tuple[str, list[Any], dict[str, Any]]:
    """The method and arguments of the request `send(session, None, None)` makes (the per-round ones left out)."""
    try:
        anyio.run(send, _Recorder(), None, None)
    except _Recorded as sent:
        if sent.method not in ASKING_METHODS:
            raise ConnectionFailed(f"{sent.method} is not served through a runner with questions") from None
        return sent.method, sent.positional, {k: v for k, v in sent.keywords.items() if k not in _SENT_PER_ROUND}
    raise ConnectionFailed("the request sent nothing")


def _named(exc: BaseException) -> str:
    """The failure's name as the callers' messages used it (httpx's names for the same events)."""
    if isinstance(exc, TimeoutError):
        return "ReadTimeout"
    if isinstance(exc, (ConnectionError, http.client.RemoteDisconnected, http.client.IncompleteRead)):
        return "RemoteProtocolError" if isinstance(exc, http.client.HTTPException) else "ReadError"
    return type(exc).__name__


class _RemoteSession:
    """Stands in for the SDK ClientSession in a read-only request: each allowed method goes to the runner."""

    def __init__(self, pool: RunnerPool, spec: ServerSpec, timeout: float) -> None:
        self._pool, self._spec, self._timeout = pool, spec, timeout

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        result_type = SESSION_METHODS.get(method)
        if result_type is None:
            raise AttributeError(f"{method} is not served through a runner")

        async def send(*args: Any, **kwargs: Any) -> Any:
            body = {"spec": spec_to_json(self._spec), "method": method, "args": list(args), "kwargs": kwargs}
            answer = await anyio.to_thread.run_sync(self._pool._post, self._spec, "/v1/session", body, self._timeout)
            return result_type.model_validate(answer["result"])

        return send
