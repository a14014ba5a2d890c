"""The session soak of bench/load/run.py (--session-soak N): N gateway sessions opened one after another by 8
clients, each an `initialize`, `notifications/initialized` and one `tools/call`; every other session is ended with
DELETE, the rest are left to idle out, as clients do. The web processes' open fds by kind are sampled at each
quarter and 8 s after: what a session leaves behind (a socket, a pipe, a task's stream) grows with N."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2

HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
}


def one_session(client: httpx2.Client, url: str, token: str, tool_name: str, end: bool) -> str:
    """One session's life: "ok", or what failed."""
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    opened = client.post(
        url,
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "session-soak", "version": "1"},
            },
        },
    )
    session = opened.headers.get("mcp-session-id")
    if opened.status_code != 200 or not session:
        return f"initialize {opened.status_code}"
    headers["Mcp-Session-Id"] = session
    client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    called = client.post(
        url,
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": f"{tool_name}__get_inventory", "arguments": {"sku": "DEMO-001"}},
        },
    )
    outcome = (
        "ok"
        if called.status_code == 200 and '"isError":false' in called.text.replace(" ", "")
        else f"tools/call {called.status_code}"
    )
    if end:
        client.delete(url, headers=headers)
    return outcome


def session_soak(
    env: dict[str, str], sessions: int, fd_kinds: Callable[[], dict[str, int]]
) -> dict[str, Any]:
    hosts = env["LOAD_HOSTS"].split(",")
    tokens = env["LOAD_TOKENS"].split(",")
    urls = [f"{host}/mcp/{env['LOAD_TENANT']}/agents/{env['LOAD_AGENT_ID']}/" for host in hosts]
    samples = [(0, fd_kinds())]
    outcomes: dict[str, int] = {}
    done = 0
    lock = threading.Lock()
    local = threading.local()

    def run(i: int) -> None:
        nonlocal done
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx2.Client(timeout=60, trust_env=False)
        try:
            outcome = one_session(
                client, urls[i % len(urls)], tokens[i % len(tokens)], env["LOAD_TOOL_NAME"], end=i % 2 == 0
            )
        except httpx2.HTTPError as exc:
            outcome = type(exc).__name__
        with lock:
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            done += 1

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        for quarter in range(4):
            list(pool.map(run, range(quarter * sessions // 4, (quarter + 1) * sessions // 4)))
            samples.append((done, fd_kinds()))
    wall = time.monotonic() - started
    time.sleep(8)
    samples.append((-1, fd_kinds()))
    print(
        f"session soak: {done} gateway sessions in {wall:.0f}s (8 clients; half ended with DELETE, half left to "
        f"idle out): {', '.join(f'{k} {n}' for k, n in sorted(outcomes.items()))}"
    )
    print("  open fds of the web processes by kind, as the sessions went (sessions done; 'idle' 8 s after):")
    for kind in sorted({k for _, kinds in samples for k in kinds}):
        print(f"    {kind:<28}" + "".join(f"{kinds.get(kind, 0):>6}" for _, kinds in samples))
    print(f"    {'total':<28}" + "".join(f"{sum(kinds.values()):>6}" for _, kinds in samples))
    print(f"    {'(at sessions)':<28}" + "".join(f"{n if n >= 0 else 'idle':>6}" for n, _ in samples))
    return {"sessions": done, "outcomes": outcomes, "fds": [sum(kinds.values()) for _, kinds in samples]}
