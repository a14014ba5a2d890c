"""What one refused call costs the web process: CPU, SQL statements and Redis round trips per quota refusal.

    REDIS_URL=redis://127.0.0.1:6379/5 .venv/bin/python bench/quota_refusal_cpu.py [-n 400] [--profile]

A tenant hammering past its quota (bench/load/quotas.py: 150-170 refusals a second) spends the web processes' CPU on
answering no: on 2 cores that is what other tenants' latency pays for. This measures, in one process (the test
suite's fixtures, a real uvicorn server for the gateway), N warm refusals of each path:

- `POST /api/v1/tools/{id}/invoke/` answered 429 QUOTA_EXCEEDED (Django's test client, the whole DRF stack);
- a gateway `tools/call` answered with an isError QUOTA_EXCEEDED result (a 2025-06-18 session client over HTTP).

The tool's quota is `per_minute: 0` (every call refused); refusals are folded (the first of the minute per key is a
row, the rest a Redis count). CPU is the whole process's (time.process_time: every thread, the HTTP client's share of
the gateway figure included), so compare runs side by side, not with another machine. `--profile` prints cProfile's
top functions (cumulative) for the invoke path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HANDSHAKE = "2025-06-18"


def _measure(kind: str, n: int, request: Any) -> dict[str, float]:
    from bench.request_costs import COUNTS

    for _ in range(5):
        request()
    COUNTS.reset()
    COUNTS.on = True
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        for _ in range(n):
            request()
    finally:
        COUNTS.on = False
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    out = {"cpu_ms": round(cpu * 1000 / n, 3), "wall_ms": round(wall * 1000 / n, 3),
           "sql": round(len(COUNTS.sql) / n, 2), "redis_trips": round(COUNTS.redis_trips / n, 2)}
    print(f"{kind}: {out}  ({n} refusals; redis commands {dict(COUNTS.redis_commands)})", flush=True)
    if os.environ.get("QUOTA_CPU_VERBOSE"):
        for sql in sorted(set(COUNTS.sql)):
            print("   ", sql[:200])
        trips = len(COUNTS.redis_log) // n
        for line in COUNTS.redis_log[-trips:]:
            print("    redis:", line[:240])
    return out


def test_refusal_cpu(transactional_db: Any, tenant: Any, member_client: Any, settings: Any) -> None:
    import httpx2

    from bench.request_costs import _install
    from tenants_app.models import Role
    from tenants_app.services import token_for_user
    from tests.agents_app.gateway.conftest import running_server
    from tests.agents_app.support import inventory_tool, make_agent
    from tools_app.services import quotas

    settings.TOOLHUB_MCP_WATCH_S = 3600
    quotas._store.forget()
    _install()
    n = int(os.environ.get("QUOTA_CPU_N", "400"))
    admin = member_client(tenant, Role.ADMIN)
    member = member_client(tenant, Role.MEMBER)
    tool_id = inventory_tool(admin)
    agent_id = make_agent(admin, model=None, tools=[{"tool": tool_id}], name="quota-cpu")
    made = admin.post("/api/v1/quotas/", {"scope": "tool", "target": str(tool_id), "per_minute": 0}, format="json")
    assert made.status_code == 201, made.content
    results: dict[str, Any] = {}

    def invoke() -> None:
        resp = member.post(f"/api/v1/tools/{tool_id}/invoke/",
                           {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}, format="json")
        assert resp.status_code == 429 and resp.json()["error_code"] == "QUOTA_EXCEEDED", resp.content

    results["api invoke 429"] = _measure("api invoke 429", n, invoke)
    if os.environ.get("QUOTA_CPU_PROFILE"):
        import cProfile
        import pstats

        prof = cProfile.Profile(time.process_time)  # CPU, not wall: a wait on Redis or the GIL is no cost here
        prof.enable()
        for _ in range(200):
            invoke()
        prof.disable()
        pstats.Stats(prof).sort_stats(os.environ.get("QUOTA_CPU_SORT", "cumulative")).print_stats(int(os.environ.get("QUOTA_CPU_LINES", "45")))

    with running_server() as served, httpx2.Client(timeout=60) as http:
        url = served.endpoint(tenant.slug, agent_id)
        base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                "Authorization": f"Bearer {token_for_user(user=member.user)}", "MCP-Protocol-Version": HANDSHAKE}
        init = http.post(url, headers=base, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        assert init.status_code == 200, init.text
        session = {**base, "Mcp-Session-Id": init.headers["mcp-session-id"]}
        http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        ids = iter(range(1, 1_000_000))

        def gateway() -> None:
            rid = next(ids)
            resp = http.post(url, headers=session, json={"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
                "name": "inventory__get_inventory", "arguments": {"sku": "DEMO-001"}}})
            assert resp.status_code == 200 and "QUOTA_EXCEEDED" in resp.text, resp.text

        results["gateway tools/call refused"] = _measure("gateway tools/call refused", n, gateway)
    out = os.environ.get("QUOTA_CPU_OUT")
    if out:
        Path(out).write_text(json.dumps(results, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=400, help="refusals measured per path")
    parser.add_argument("--profile", action="store_true", help="cProfile 200 refused invokes")
    parser.add_argument("--save", help="write the figures to this JSON file")
    args = parser.parse_args()
    import pytest

    os.environ["QUOTA_CPU_N"] = str(args.n)
    if args.profile:
        os.environ["QUOTA_CPU_PROFILE"] = "1"
    if args.save:
        os.environ["QUOTA_CPU_OUT"] = args.save
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    if not os.environ.get("REDIS_URL"):
        print("REDIS_URL is not set: counters in process memory and refusals not folded (each one a row)",
              file=sys.stderr)
    os.chdir(ROOT)
    import django

    django.setup()
    code = pytest.main([str(Path(__file__).resolve()), "-q", "-s", "-p", "no:cacheprovider", "-p", "tests.conftest",
                        "-p", "tests.agents_app.conftest", "-o", "python_files=quota_refusal_cpu.py",
                        "-o", "timeout=600", "--rootdir", str(ROOT)])
    raise SystemExit(code)


if __name__ == "__main__":
    main()
