"""CPU per 2026-07-28 `tools/call` request through a session manager's modern entry, in one process: the SDK's
`StreamableHTTPSessionManager` (SSE mode: task group, two tasks, memory stream) against the gateway's
`SharedSessionManager` (agents_app.gateway.transport.handle_modern: the SDK's JSON-mode path for a request with
nothing to stream). The same trivial lowlevel `Server`, fake ASGI I/O, `time.thread_time`; no network, no database.

    .venv/bin/python bench/modern_entry_cpu.py [-n 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

import mcp_types as types  # noqa: E402
from mcp.server.lowlevel.server import Server  # noqa: E402
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager  # noqa: E402

from agents_app.gateway.sessions import SharedSessionManager  # noqa: E402

MODERN = "2026-07-28"
BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "t", "arguments": {"a": 1},
    "_meta": {types.PROTOCOL_VERSION_META_KEY: MODERN, types.CLIENT_CAPABILITIES_META_KEY: {}}}}).encode()
HEADERS = [(b"host", b"127.0.0.1"), (b"accept", b"application/json, text/event-stream"),
           (b"content-type", b"application/json"), (b"mcp-protocol-version", MODERN.encode()),
           (b"mcp-method", b"tools/call"), (b"mcp-name", b"t"), (b"content-length", str(len(BODY)).encode())]


async def call_tool(ctx: Any, params: Any) -> dict[str, Any]:
    await asyncio.sleep(0)  # a handler that yields once, as one awaiting a worker does
    return {"resultType": "complete", "content": [{"type": "text", "text": "ok"}], "isError": False}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[])


async def one(manager: Any) -> None:
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": HEADERS, "query_string": b"",
             "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "root_path": ""}
    sent: list[Any] = []
    pending = [{"type": "http.request", "body": BODY, "more_body": False}]
    done = asyncio.Event()

    async def receive() -> Any:
        if pending:
            return pending.pop()
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    await manager.handle_request(scope, receive, send)
    done.set()
    assert sent[0]["status"] == 200 and b'"ok"' in sent[-1]["body"], sent


async def per_request_us(cls: Any, n: int) -> float:
    # call_tool answers a wire dict, as the gateway's does (the runner serializes a dict as it does a model).
    server: Server[Any] = Server("bench", on_call_tool=cast(Any, call_tool), on_list_tools=list_tools)
    manager = cls(app=server, json_response=False)
    async with manager.run():
        for _ in range(200):
            await one(manager)
        started = time.thread_time()
        for _ in range(n):
            await one(manager)
        return (time.thread_time() - started) / n * 1e6


async def main(n: int, rounds: int) -> None:
    for _ in range(rounds):
        for cls in (StreamableHTTPSessionManager, SharedSessionManager):
            print(f"{cls.__name__:30s} {await per_request_us(cls, n):6.0f} us of CPU per request")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.rounds))
