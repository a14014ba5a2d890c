"""The inventory server on streamable HTTP with every request it receives logged, one JSON line each, to the file
named by BENCH_UPSTREAM_LOG: the time, the HTTP method, path, the headers that tell requests apart and the JSON-RPC
method(s) of the body. bench/gateway_eras.py --log-upstream uses it to see what the gateway sends the upstream per
call (the counting phase attributes the lines written during each kind's calls to that kind).

    BENCH_UPSTREAM_LOG=/tmp/up.log .venv/bin/python bench/_inventory_server_logged.py --port 8765
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolhub_demo.inventory_server import parse_args, server

HEADERS = (b"mcp-session-id", b"mcp-protocol-version", b"mcp-method", b"mcp-name", b"accept", b"user-agent",
           b"last-event-id", b"content-type")


def logged(app: Any, path: str) -> Any:
    out = open(path, "a", buffering=1)

    async def middleware(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        headers = {k.decode(): v.decode(errors="replace") for k, v in scope["headers"] if k.lower() in HEADERS}
        status: list[int] = []

        async def receiving() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
            return message

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        started = time.time()
        try:
            await app(scope, receiving, sending)
        finally:
            methods: list[str] = []
            try:
                body = json.loads(b"".join(chunks) or b"null")
                for item in body if isinstance(body, list) else [body]:
                    if isinstance(item, dict):
                        methods.append(str(item.get("method") or ("response" if "result" in item else "?")))
            except ValueError:
                methods.append("<not json>")
            out.write(json.dumps({"t": started, "http": scope["method"], "path": scope["path"], "rpc": methods,
                                  "status": status[0] if status else None, "headers": headers,
                                  "client_port": (scope.get("client") or ("", 0))[1],
                                  "body_chunks": len(chunks), "body": b"".join(chunks).decode(errors="replace")[:400]}) + "\n")

    return middleware


def main() -> None:
    import uvicorn

    args = parse_args()
    app = logged(server.streamable_http_app(), os.environ["BENCH_UPSTREAM_LOG"])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
