"""config.asgi's application with the cyclic garbage collector's work counted: every collection's generation and
duration (gc.callbacks, perf_counter: a collection holds the GIL, so its wall time is CPU). GET /__bench_gc__ gives
the totals so far ({generation: [collections, ms]} and gc.get_count()); POST /__bench_gc__ {"freeze": true} calls
gc.freeze() (what is alive now is never traversed again). bench/gateway_eras.py `--gc-probe` reads the totals around
each kind's counted calls, then freezes and counts once more. Nothing here is imported by Toolhub.
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any

from bench._common import read_body, send_json
from config.asgi import application as toolhub

PATH = "/__bench_gc__"
_totals: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
_started: list[float] = []


def _callback(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
    elif _started:
        took = (time.perf_counter() - _started.pop()) * 1000
        total = _totals[info["generation"]]
        total[0] += 1
        total[1] += took


gc.callbacks.append(_callback)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == PATH:
        if scope["method"] == "POST":
            if json.loads(await read_body(receive) or b"{}").get("freeze"):
                gc.collect()
                gc.freeze()
        await send_json(send, {"totals": _totals, "count": gc.get_count(), "frozen": gc.get_freeze_count()})
        return
    await toolhub(scope, receive, send)
