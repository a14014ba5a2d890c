"""A real HTTP server speaking OpenAI chat completions: scripted turns for tests, a rule-based demo model.

Scripted use (tests)::

    with FakeLLM([call("inv__get", {"sku": "A-1"}), text("done")], api_key="k") as llm:
        ModelConfig(base_url=llm.base_url, model="fake", api_key="k")
        ...
        llm.requests  # every request body the "model" received

Demo use (`make run` without a configured model)::

    python -m toolhub_demo.demo_model --port 8765

The demo model is a handful of fixed rules, not a language model, and says so in every answer.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeLLM",
    "LLMHub",
    "Turn",
    "ToolCallSpec",
    "call",
    "calls",
    "demo_reply",
    "http_error",
    "slow",
    "text",
]


@dataclass
class ToolCallSpec:
    """One tool call to send; `arguments` is sent verbatim when a string (so it may be malformed JSON)."""

    name: str
    arguments: str | dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Turn:
    """One scripted reply: text and/or tool calls, or an HTTP error, optionally after a delay."""

    text: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    status: int = 200
    error_message: str = "fake LLM error"
    delay_s: float = 0.0  # before the response headers
    chunk_delay_s: float = 0.0  # between streamed chunks
    linger_s: float = 0.0  # after `data: [DONE]`, before the end of the streamed body


def text(content: str, **kw: Any) -> Turn:
    return Turn(text=content, **kw)


def call(name: str, arguments: str | dict[str, Any] | None = None, **kw: Any) -> Turn:
    return Turn(tool_calls=[ToolCallSpec(name, {} if arguments is None else arguments)], **kw)


def calls(*specs: tuple[str, str | dict[str, Any]], content: str = "", **kw: Any) -> Turn:
    """Several tool calls in one turn (parallel tool calls)."""
    return Turn(text=content, tool_calls=[ToolCallSpec(n, a) for n, a in specs], **kw)


def http_error(status: int = 500, message: str = "fake LLM internal error") -> Turn:
    return Turn(status=status, error_message=message)


def slow(delay_s: float, content: str = "slow answer") -> Turn:
    return Turn(text=content, delay_s=delay_s)


Responder = Callable[[dict[str, Any]], Turn]
ScriptItem = Turn | Responder


# --- demo model ---------------------------------------------------------------------------------

DEMO_NOTICE = "[demo model: fixed rules, not an AI]"
SKU_RE = re.compile(r"\b[A-Z]{2,}-\d{2,}\b")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _sku_argument(parameters: dict[str, Any]) -> str:
    props = parameters.get("properties") or {}
    for name in props:
        if "sku" in name.lower():
            return str(name)
    required = parameters.get("required") or []
    if required:
        return str(required[0])
    return next(iter(props), "sku")


def demo_reply(body: dict[str, Any]) -> Turn:
    """Deterministic rules: look up a mentioned SKU with an offered *get_inventory tool, then report it; asked for
    a chart with show_data offered, show the demo's orders by status."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        content = _content_text(last.get("content"))
        if content.startswith("{") and '"widget":' in content:
            return Turn(text=f"{DEMO_NOTICE} The chart above shows the orders in each status, from your records.")
        return Turn(text=f"{DEMO_NOTICE} The tool returned: {content[:500]}")
    user_text = next(
        (_content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )
    if "chart" in user_text.lower():
        for tool in body.get("tools") or []:
            fn = tool.get("function") or {}
            if str(fn.get("name", "")).endswith("show_data"):
                return Turn(tool_calls=[ToolCallSpec(fn["name"], {
                    "query_name": "orders_by_status", "widget": "chart",
                    "props": {"type": "bar", "x": "status", "y": ["orders", "units"], "title": "Orders by status"}})])
    sku = SKU_RE.search(user_text)
    if sku:
        for tool in body.get("tools") or []:
            fn = tool.get("function") or {}
            if str(fn.get("name", "")).endswith("get_inventory"):
                arg = _sku_argument(fn.get("parameters") or {})
                return Turn(tool_calls=[ToolCallSpec(fn["name"], {arg: sku.group(0)})])
    return Turn(
        text=(
            f"{DEMO_NOTICE} This is Toolhub's built-in demo model; it only follows a few fixed rules. "
            "Configure a real chat model for real answers. Try mentioning a SKU such as DEMO-001 "
            "to an agent that has an inventory tool."
        )
    )


# --- server -------------------------------------------------------------------------------------


class _QuietServer(ThreadingHTTPServer):
    """The HTTP server under one FakeLLM or one LLMHub: `route` names the FakeLLM that answers a request path
    and the path it sees (`/v1/...`); `start`/`stop` serve it from a thread of its own."""

    daemon_threads = True

    def __init__(self, port: int, route: Callable[[str], tuple[FakeLLM | None, str]], name: str) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.route, self.name = route, name
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name,
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        # Small SSE chunks plus Nagle and delayed ACKs would add ~40 ms per reply.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or hang up mid-reply are part of the tests


class LLMHub:
    """One server for many FakeLLMs (tests start it once per process): each FakeLLM made with `hub=` answers under
    a path prefix of its own (`/llm/<random>/v1`), with its own script, key and recorded requests; once stopped, its
    prefix answers 404, so a request can never reach another FakeLLM's script."""

    def __init__(self, port: int = 0) -> None:
        self._fakes: dict[str, FakeLLM] = {}
        self._lock = threading.Lock()
        self._server = _QuietServer(port, self._route, "fake-llm-hub")

    def _route(self, path: str) -> tuple[FakeLLM | None, str]:
        _, first, token, *rest = (path.split("/", 3) + ["", "", ""])[:4]
        with self._lock:
            fake = self._fakes.get(token) if first == "llm" else None
        return fake, "/" + (rest[0] if rest else "")

    def add(self, fake: FakeLLM) -> str:
        token = uuid.uuid4().hex
        with self._lock:
            self._fakes[token] = fake
        return f"/llm/{token}"

    def remove(self, prefix: str) -> None:
        with self._lock:
            self._fakes.pop(prefix.rsplit("/", 1)[-1], None)

    def start(self) -> LLMHub:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> LLMHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeLLM:
    """Threaded OpenAI-compatible server on 127.0.0.1 playing `script` in order (or the demo rules)."""

    def __init__(
        self,
        script: Sequence[ScriptItem] | None = None,
        *,
        api_key: str | None = None,
        repeat_last: bool = False,
        port: int = 0,
        model: str = "fake-model",
        hub: LLMHub | None = None,
    ) -> None:
        self.script: list[ScriptItem] = list(script) if script is not None else []
        self.demo = script is None
        self.api_key = api_key
        self.repeat_last = repeat_last
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.peers: list[Any] = []  # each request's client address: one per connection the client opened
        self._lock = threading.Lock()
        self._position = 0
        self._hub = hub
        self._prefix = ""  # under a hub: /llm/<token>, set by start()
        self._server = hub._server if hub is not None else _QuietServer(port, lambda path: (self, path), "fake-llm")

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self._prefix}/v1"

    def start(self) -> FakeLLM:
        if self._hub is not None:
            self._prefix = self._hub.add(self)
            return self
        self._server.start()
        return self

    def stop(self) -> None:
        if self._hub is not None:
            self._hub.remove(self._prefix)
            return
        self._server.stop()

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        self._server.serve_forever()

    # The next scripted turn for a request, or None when the script has run out.
    def _next_turn(self, body: dict[str, Any]) -> Turn | None:
        if self.demo:
            return demo_reply(body)
        with self._lock:
            if self._position < len(self.script):
                item = self.script[self._position]
                self._position += 1
            elif self.repeat_last and self.script:
                item = self.script[-1]
            else:
                return None
        return item(body) if callable(item) else item

    # --- OpenAI wire shapes ---

    def _envelope(self, body: dict[str, Any], obj: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": obj,
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
        }

    @staticmethod
    def _call_ids(turn: Turn) -> list[str]:
        return [c.id or f"call_{uuid.uuid4().hex[:16]}" for c in turn.tool_calls]

    def _completion(self, turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.arguments_text()}}
                for cid, c in zip(self._call_ids(turn), turn.tool_calls, strict=True)
            ]
        finish = "tool_calls" if turn.tool_calls else "stop"
        return {
            **self._envelope(body, "chat.completion"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def _chunks(self, turn: Turn, body: dict[str, Any]) -> list[dict[str, Any]]:
        env = self._envelope(body, "chat.completion.chunk")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**env, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        out = [chunk({"role": "assistant", "content": ""})]
        words = re.findall(r"\S+\s*|\s+", turn.text)
        out.extend(chunk({"content": w}) for w in words)
        # Tool calls: a header delta per call, then argument fragments interleaved across calls,
        # as real servers do for parallel calls; clients must assemble by index.
        ids = self._call_ids(turn)
        for index, (cid, c) in enumerate(zip(ids, turn.tool_calls, strict=True)):
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": cid,
                                "type": "function",
                                "function": {"name": c.name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
        pieces = [[a[i : i + 7] for i in range(0, len(a), 7)] for a in (c.arguments_text() for c in turn.tool_calls)]
        for step in range(max((len(p) for p in pieces), default=0)):
            for index, frags in enumerate(pieces):
                if step < len(frags):
                    out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": frags[step]}}]}))
        out.append(chunk({}, "tool_calls" if turn.tool_calls else "stop"))
        return out


class _Handler(BaseHTTPRequestHandler):
    """Answers for the FakeLLM its server routes the request's path to (`_QuietServer.route`)."""
    server: _QuietServer

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        fake, path = self.server.route(self.path)
        if fake is not None and path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        fake, path = self.server.route(self.path)
        if fake is None or not path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        with fake._lock:
            fake.requests.append(body)
            fake.headers.append({k.lower(): v for k, v in self.headers.items()})
            fake.peers.append(self.client_address)
        auth = self.headers.get("Authorization", "")
        if fake.api_key is not None and auth != f"Bearer {fake.api_key}":
            # Like some real servers, echo the presented key: clients must not pass it on.
            presented = auth.removeprefix("Bearer ")
            self._json(
                401,
                {
                    "error": {
                        "message": f"Incorrect API key provided: {presented}",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            )
            return
        turn = fake._next_turn(body)
        if turn is None:
            self._json(500, {"error": {"message": "fake LLM script exhausted", "type": "server_error"}})
            return
        if turn.delay_s:
            time.sleep(turn.delay_s)
        if turn.status != 200:
            self._json(turn.status, {"error": {"message": turn.error_message, "type": "server_error"}})
            return
        try:
            if body.get("stream"):
                self._stream(fake, turn, body)
            else:
                self._json(200, fake._completion(turn, body))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. it timed out)

    def _stream(self, fake: FakeLLM, turn: Turn, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in fake._chunks(turn, body):
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            if turn.chunk_delay_s:
                time.sleep(turn.chunk_delay_s)
        self._write_chunk(b"data: [DONE]\n\n")
        if turn.linger_s:
            time.sleep(turn.linger_s)
        self._write_chunk(b"")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@contextmanager
def llm_servers(default_api_key: str | None, hub: LLMHub | None = None) -> Iterator[Callable[..., FakeLLM]]:
    """A starter of FakeLLMs (`start(script, **kw)`), each expecting `default_api_key` unless told; all stop at exit.
    With `hub`, each is a prefix of the hub's one server instead of a server of its own."""
    servers: list[FakeLLM] = []

    def start(script: Sequence[ScriptItem] | None, **kwargs: Any) -> FakeLLM:
        kwargs.setdefault("api_key", default_api_key)
        kwargs.setdefault("hub", hub)
        server = FakeLLM(script, **kwargs).start()
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Toolhub's demo chat model (fixed rules, not an AI).")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--api-key", default=None, help="require this bearer key (default: accept any)")
    args = parser.parse_args(argv)
    server = FakeLLM(None, api_key=args.api_key, port=args.port)
    print(f"demo model listening on {server.base_url} (rule-based, not an AI)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()


if __name__ == "__main__":
    main()
