"""config.asgi's application where the requests that carry `x-bench-one-worker` run their worker-thread jobs
(agents_app/gateway/server.py `db`: the loop's default executor) on one dedicated thread, the others on the loop's
usual default executor (several threads: which idle one takes a job is the OS's pick, so a warm call's job lands on
alternating threads). bench/gateway_eras.py `--ab-one-worker` sends one client of each era each way, in turns, to
one gateway process: what a job always on the same (cache-warm) thread would save. The bench's calls are sequential
(one request in flight), so swapping the default executor per request is exact. Nothing here is imported by Toolhub.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from config.asgi import application as toolhub

HEADER = b"x-bench-one-worker"
_executors: dict[bool, ThreadPoolExecutor] = {}


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == "/__bench_threads__":  # {native id: Python thread name}
        body = json.dumps({t.native_id: t.name for t in threading.enumerate()}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    if scope["type"] == "http":
        one = any(name == HEADER for name, _ in scope.get("headers", []))
        if one not in _executors:
            _executors[one] = ThreadPoolExecutor(max_workers=1 if one else None, thread_name_prefix=f"bench-{one}")
        asyncio.get_running_loop().set_default_executor(_executors[one])
    await toolhub(scope, receive, send)
