"""What one warm request of each kind of the mixed workload costs in round trips: SQL queries and Redis commands.

    REDIS_URL=redis://127.0.0.1:6379/9 .venv/bin/python bench/request_costs.py [--save after.json] [--compare before.json]

Timings on a shared machine say little (bench/load/PROFILE.md was taken at load 15); these counts are
deterministic, so they are what a fix of the hot spots is checked against. Each kind is warmed twice (pool,
identity cache, hot-cache snapshots, session record) and the third request is counted:

- SQL: every statement any thread sends (Django's CursorWrapper, patched for the run), so the gateway's worker
  threads and the uvicorn server thread count as well as the test client's;
- Redis: round trips (one per command sent alone, one per pipeline) and the commands they carry, from redis-py's
  `Redis.execute_command` and `Pipeline.execute`, in every thread. Needs REDIS_URL (use your own db number: the
  run clears it); without it the cache is in process memory and Redis shows 0.

Kinds: GET /api/v1/tools/ (20 tools in the tenant), GET /api/v1/tools/{id}/, a warm invoke (POST .../invoke/,
member), the gateway's tools/list and tools/call for a 2025-06-18 session client and a 2026-07-28 stateless one
(over a real uvicorn server), and a chat turn with the fake model (a text answer; a turn calling one tool; the load mix's turn: a new
conversation calling one tool).
LOCAL servers run in the web process's own pool here, not in a runner: the runner registry read of production
is not in these counts.

CPU: REQUEST_COSTS_REPEAT=N adds each in-process kind's process CPU and its calling thread's CPU (`thread_us`: the
test client runs middleware and view in that thread) per request over N more; REQUEST_COSTS_SERVED=N the served
kinds' server-side CPU (every thread but the client's) and its request threads' (core.asgi's "django-request").
REQUEST_COSTS_LOOP_PROFILE=<prefix> writes a thread-CPU profile of the server's loop thread per served kind.
REQUEST_COSTS_REST_ONLY=1 measures the REST kinds alone (in-process and served), skipping chat and the gateway;
REQUEST_COSTS_SKIP_CHAT=1 skips only the chat turns; REQUEST_COSTS_CHAT_ONLY=1 stops after them (no served kinds).
REQUEST_COSTS_REMOTE=1 measures the load's ContextForge comparison mix instead: a REMOTE tool on one streamable-HTTP
upstream (toolhub_demo/inventory_server.py, as bench/gateway.py's http_upstream), its list and invoke in-process, then
served GET /tools/, POST invoke and the gateway's tools/call of that tool (a 2025 session); it keeps each thread's
database connection (DB_CONN_MAX_AGE=600 unless set): production pools them (config.settings.production), and
without it every served request on PostgreSQL opens a connection (12% of the server's samples in py-spy).
REQUEST_COSTS_HOLD_S=N then serves that mix for N more seconds for an outside profiler (py-spy; the pid is printed).

It runs under pytest (the test suite's fixtures: tests/conftest.py and the agents' and gateway's conftests).
`--save` writes the counts as JSON; `--compare` prints them beside a saved run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS: dict[str, dict[str, int]] = {}
MODERN = "2026-07-28"
HANDSHAKE = "2025-06-18"


class Counts:
    """Global counters of SQL statements and Redis round trips/commands while `counting()` is on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.on = False
        self.sql: list[str] = []
        self.redis_trips = 0
        self.redis_commands: Counter[str] = Counter()
        self.redis_log: list[str] = []

    def reset(self) -> None:
        with self.lock:
            self.sql, self.redis_trips, self.redis_commands, self.redis_log = [], 0, Counter(), []


COUNTS = Counts()


def _install() -> None:
    import redis.client
    from django.db.backends import utils

    wrapper: Any = utils.CursorWrapper
    original_execute = wrapper._execute_with_wrappers

    def execute(self: Any, sql: Any, params: Any, many: bool, executor: Any) -> Any:
        if COUNTS.on:
            with COUNTS.lock:
                COUNTS.sql.append(str(sql))
        return original_execute(self, sql, params, many, executor)

    wrapper._execute_with_wrappers = execute

    original_command = redis.client.Redis.execute_command

    def command(self: Any, *args: Any, **options: Any) -> Any:
        if COUNTS.on:
            with COUNTS.lock:
                COUNTS.redis_trips += 1
                COUNTS.redis_commands[str(args[0]).upper()] += 1
                COUNTS.redis_log.append(" ".join(map(str, args))[:160])
        return original_command(self, *args, **options)

    redis.client.Redis.execute_command = command  # type: ignore[method-assign]

    original_pipeline = redis.client.Pipeline.execute

    def pipeline(self: Any, raise_on_error: bool = True) -> Any:
        if COUNTS.on and self.command_stack:
            with COUNTS.lock:
                COUNTS.redis_trips += 1
                for args, _options in self.command_stack:
                    COUNTS.redis_commands[str(args[0]).upper()] += 1
                COUNTS.redis_log.append("pipeline: " + "; ".join(" ".join(map(str, a)) for a, _ in self.command_stack)[:300])
        return original_pipeline(self, raise_on_error)

    redis.client.Pipeline.execute = pipeline  # type: ignore[method-assign]


@contextmanager
def counting(kind: str) -> Iterator[None]:
    COUNTS.reset()
    COUNTS.on = True
    try:
        yield
    finally:
        COUNTS.on = False
    RESULTS[kind] = {"sql": len(COUNTS.sql), "redis_trips": COUNTS.redis_trips,
                     "redis_commands": sum(COUNTS.redis_commands.values())}
    if os.environ.get("REQUEST_COSTS_VERBOSE"):
        print(f"\n--- {kind}: {RESULTS[kind]}  redis: {dict(COUNTS.redis_commands)}")
        for sql in COUNTS.sql:
            print("   ", sql[:160])
        for line in COUNTS.redis_log:
            print("    redis:", line)


def warm_then_count(kind: str, request: Callable[[], Any]) -> None:
    request()
    request()
    with counting(kind):
        request()
    # Then CPU and wall time per request over REQUEST_COSTS_REPEAT more (process CPU, every thread: the test
    # client's side is in it too, the same before and after a change, so compare these side by side only).
    repeat = int(os.environ.get("REQUEST_COSTS_REPEAT", "0"))
    if repeat > 0:
        cpu, thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
        for _ in range(repeat):
            request()
        RESULTS[kind]["cpu_us"] = round((time.process_time() - cpu) / repeat * 1e6)
        # The calling thread only: for the REST kinds the test client runs middleware and view in it (the request
        # thread of a web worker, plus the client's own constant share); the pool's loop thread is left out.
        RESULTS[kind]["thread_us"] = round((time.thread_time() - thread) / repeat * 1e6)
        RESULTS[kind]["wall_us"] = round((time.perf_counter() - wall) / repeat * 1e6)
    wanted = os.environ.get("REQUEST_COSTS_PROFILE")  # a kind (or part of one): its thread-CPU profile
    if wanted and wanted in kind and repeat > 0:
        import cProfile

        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        for _ in range(repeat):
            request()
        profiler.disable()
        profiler.dump_stats(os.environ.get("REQUEST_COSTS_PROFILE_OUT", "/tmp/request_costs.prof"))


@contextmanager
def _loop_profile(kind: str, poke: Callable[[], Any]) -> Iterator[None]:
    """REQUEST_COSTS_LOOP_PROFILE=<prefix>: a thread-CPU cProfile of the server's event loop thread (what a served
    request costs outside its request thread: uvicorn's protocol, core.asgi's side of the hop) while `kind` runs,
    written to <prefix>-<kind>.prof. The profiler is switched on and off from inside a request on the loop (`poke`
    sends the one that switches it off)."""
    prefix = os.environ.get("REQUEST_COSTS_LOOP_PROFILE")
    if not prefix:
        yield
        return
    import cProfile

    from core.asgi import OneHopASGIHandler

    profiler = cProfile.Profile(time.thread_time)
    switch: dict[str, bool] = {"on": True}
    original = OneHopASGIHandler.__call__

    async def call(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if switch.pop("on", False):
            profiler.enable()  # the calling thread: the server's loop
        if switch.pop("off", False):
            profiler.disable()
        await original(self, scope, receive, send)

    OneHopASGIHandler.__call__ = call  # type: ignore[method-assign]
    try:
        yield
        switch["off"] = True
        poke()
    finally:
        OneHopASGIHandler.__call__ = original  # type: ignore[method-assign]
    name = "".join(c if c.isalnum() else "-" for c in kind)
    profiler.dump_stats(f"{prefix}-{name}.prof")


def gateway_costs(url: str, token: str) -> None:
    """tools/list and tools/call of a 2025-06-18 session client, then of a 2026-07-28 stateless one."""
    import httpx2

    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
            "Authorization": f"Bearer {token}"}
    with httpx2.Client(timeout=60) as http:
        ids = iter(range(1, 10_000))

        def rpc(headers: dict[str, str], method: str, params: dict[str, Any]) -> dict[str, Any]:
            rid = next(ids)
            if headers.get("MCP-Protocol-Version") == MODERN:  # 2026-07-28 routes on headers
                headers = {**headers, "Mcp-Method": method, **(
                    {"Mcp-Name": str(params["name"])} if "name" in params else {})}
            resp = http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": rid, "method": method,
                                                         "params": params})
            assert resp.status_code == 200, resp.text
            for line in resp.text.splitlines():
                if line.startswith("data:") and json.loads(line[5:]).get("id") == rid:
                    return dict(json.loads(line[5:]))
            return dict(json.loads(resp.text))

        old = {**base, "MCP-Protocol-Version": HANDSHAKE}

        def initialize() -> Any:
            init = http.post(url, headers=old, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
            assert init.status_code == 200, init.text
            return init

        warm_then_count("gateway 2025 initialize", initialize)
        init = initialize()
        session = {**old, "Mcp-Session-Id": init.headers["mcp-session-id"]}
        http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        arguments = {"name": "inventory__get_inventory", "arguments": {"sku": "DEMO-001"}}

        def listed(headers: dict[str, str], params: dict[str, Any]) -> Callable[[], None]:
            def go() -> None:
                message = rpc(headers, "tools/list", params)
                assert message["result"]["tools"], message
            return go

        def called(headers: dict[str, str], params: dict[str, Any]) -> Callable[[], None]:
            def go() -> None:
                message = rpc(headers, "tools/call", {**arguments, **params})
                assert not message["result"].get("isError"), message
            return go

        warm_then_count("gateway 2025 tools/list", listed(session, {}))
        warm_then_count("gateway 2025 tools/call", called(session, {}))
        modern = {**base, "MCP-Protocol-Version": MODERN}
        meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                          "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                          "io.modelcontextprotocol/clientCapabilities": {}}}
        warm_then_count("gateway 2026 tools/list", listed(modern, meta))
        warm_then_count("gateway 2026 tools/call", called(modern, meta))


def _server_cpu_s(prefix: str = "") -> float:
    """CPU seconds of every thread of this process but the main one (the client's): the uvicorn server, its
    request threads, the gateway's executor and the LOCAL pool's loop, i.e. what a web worker spends. With
    `prefix`, only the threads whose name starts with it (core.asgi's request threads are "django-request")."""
    import os as _os

    main = _os.getpid()
    tick = _os.sysconf("SC_CLK_TCK")
    total = 0
    named = {t.native_id for t in threading.enumerate() if t.name.startswith(prefix)} if prefix else None
    for tid in _os.listdir(f"/proc/{main}/task"):
        if int(tid) == main or (named is not None and int(tid) not in named):
            continue
        try:
            fields = Path(f"/proc/{main}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


@contextmanager
def _http_upstream() -> Iterator[str]:
    """The inventory server on streamable HTTP on loopback (bench/gateway.py's http_upstream, the load's
    ContextForge comparison's upstream); yields its /mcp URL."""
    import signal
    import socket
    import subprocess

    import httpx2

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(ROOT / "toolhub_demo" / "inventory_server.py"), "--transport",
                             "streamable-http", "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx2.get(url, timeout=2)
                break
            except httpx2.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def served_costs(base_url: str, token: str, slug: str, tool_id: int, url: str, *, remote: str = "") -> None:
    """The REST kinds and the gateway's tools/call over the real uvicorn server (production's ASGI path), with the
    server side's CPU per request (every thread but the client's) over REQUEST_COSTS_SERVED requests."""
    import httpx2

    repeat = int(os.environ.get("REQUEST_COSTS_SERVED", "0"))
    if repeat <= 0:
        return
    rest = {"Authorization": f"Token {token}", "X-Tenant": slug}
    mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "Authorization": f"Bearer {token}", "MCP-Protocol-Version": HANDSHAKE}
    rest_only = bool(os.environ.get("REQUEST_COSTS_REST_ONLY"))
    name = remote or "inventory__get_inventory"  # the gateway's qualified name of the called function
    with httpx2.Client(timeout=60) as http:
        session = dict(mcp)
        if not rest_only:
            init = http.post(url, headers=mcp, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
            session["Mcp-Session-Id"] = init.headers["mcp-session-id"]
            http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

        def listing() -> None:
            assert http.get(f"{base_url}/api/v1/tools/", headers=rest).status_code == 200

        def invoke() -> None:
            resp = http.post(f"{base_url}/api/v1/tools/{tool_id}/invoke/", headers=rest,
                             json={"function": "get_inventory", "arguments": {"sku": "DEMO-001"}})
            assert resp.status_code == 200 and resp.json()["success"], resp.text

        def call() -> None:
            resp = http.post(url, headers=session, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": name, "arguments": {"sku": "DEMO-001"}}})
            assert resp.status_code == 200 and '"isError":false' in resp.text.replace(" ", ""), resp.text

        def initialize() -> None:
            resp = http.post(url, headers=mcp, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
            assert resp.status_code == 200, resp.text
            http.request("DELETE", url, headers={**mcp, "Mcp-Session-Id": resp.headers["mcp-session-id"]})

        kinds = [("served GET /tools/", listing), ("served POST invoke", invoke)]
        if remote:  # the load's ContextForge mix: no initialize kind (each user's is one-time)
            kinds += [("served MCP tools/call", call)]
        elif not rest_only:
            kinds += [("served MCP tools/call", call), ("served MCP initialize+DELETE", initialize)]
        for kind, request in kinds:
            for _ in range(5):
                request()
            cpu, thread, wall = _server_cpu_s(), _server_cpu_s("django-request"), time.perf_counter()
            with _loop_profile(kind, request):
                for _ in range(repeat):
                    request()
            RESULTS[kind] = {"sql": 0, "redis_trips": 0, "redis_commands": 0,
                             "cpu_us": round((_server_cpu_s() - cpu) / repeat * 1e6),
                             "thread_us": round((_server_cpu_s("django-request") - thread) / repeat * 1e6),
                             "wall_us": round((time.perf_counter() - wall) / repeat * 1e6)}
        hold = float(os.environ.get("REQUEST_COSTS_HOLD_S", "0"))  # time for an outside profiler (py-spy)
        until = time.monotonic() + hold
        if hold:
            print(f"\nholding the mix for {hold:.0f} s (pid {os.getpid()})", file=sys.stderr, flush=True)
        while time.monotonic() < until:
            for request in (listing, invoke, invoke, call):
                request()


# ---- the pytest side (collected from this file by main()) ------------------------------------------------


def test_request_costs(transactional_db: Any, tenant: Any, member_client: Any, tool_factory: Any,
                       start_llm: Any, settings: Any) -> None:
    from tenants_app.models import Role
    from tenants_app.services import token_for_user
    from tests.agents_app.gateway.conftest import running_server
    from tests.agents_app.support import chat, inventory_tool, make_agent, make_model
    from tests.fixtures.fake_llm import call, text
    from tools_app.models import Tool

    settings.TOOLHUB_MCP_WATCH_S = 3600  # no list_changed sweep inside a counted request
    _install()
    admin = member_client(tenant, Role.ADMIN)
    member = member_client(tenant, Role.MEMBER)
    tool_id = inventory_tool(admin)
    for _ in range(max(0, 20 - Tool.objects.filter(tenant=tenant).count())):
        tool_factory(tenant=tenant)
    assert Tool.objects.filter(tenant=tenant).count() >= 20

    def listing() -> None:
        resp = member.get("/api/v1/tools/")
        assert resp.status_code == 200, resp.content

    def detail() -> None:
        assert member.get(f"/api/v1/tools/{tool_id}/").status_code == 200

    def invoke() -> None:
        resp = member.post(f"/api/v1/tools/{tool_id}/invoke/",
                           {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}, format="json")
        assert resp.status_code == 200 and resp.json()["success"], resp.content

    if os.environ.get("REQUEST_COSTS_REMOTE"):  # the ContextForge comparison's mix: one REMOTE upstream
        with _http_upstream() as upstream:
            resp = admin.post("/api/v1/tools/", {"name": "remote_inventory", "type": "REMOTE", "config": {
                "url": upstream, "transport": "streamable_http"}}, format="json")
            assert resp.status_code == 201, resp.content
            remote_id = int(resp.json()["id"])
            assert admin.post(f"/api/v1/tools/{remote_id}/refresh/").json()["ok"]
            agent_id = make_agent(admin, model=None, tools=[{"tool": remote_id}], name="remote")
            tool_id = remote_id

            def remote_invoke() -> None:
                resp = member.post(f"/api/v1/tools/{tool_id}/invoke/",
                                   {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}, format="json")
                assert resp.status_code == 200 and resp.json()["success"], resp.content

            warm_then_count("GET /tools/ (list)", listing)
            warm_then_count("POST /tools/{id}/invoke/ (REMOTE)", remote_invoke)
            with running_server() as served:
                served_costs(served.base_url, token_for_user(user=member.user), tenant.slug, tool_id,
                             served.endpoint(tenant.slug, agent_id), remote="remote_inventory__get_inventory")
        _write_results()
        return
    warm_then_count("GET /tools/ (list)", listing)
    warm_then_count("GET /tools/{id}/", detail)
    warm_then_count("POST /tools/{id}/invoke/", invoke)
    if os.environ.get("REQUEST_COSTS_REST_ONLY"):  # the REST kinds alone (the request thread's side, quickly)
        with running_server() as served:
            served_costs(served.base_url, token_for_user(user=member.user), tenant.slug, tool_id, "")
        _write_results()
        return

    llm = start_llm([text("fine")], repeat_last=True)
    agent_id = make_agent(admin, model=make_model(admin, llm), tools=[{"tool": tool_id}], name="helper")
    conversation: dict[str, int] = {}

    def turn() -> None:
        body = chat(member, agent_id, "hello?", conversation_id=conversation.get("id"))
        assert body["status"] == "completed", body
        conversation["id"] = body["conversation_id"]

    if os.environ.get("REQUEST_COSTS_SKIP_CHAT"):  # the REST and gateway kinds only (quicker A/B rounds)
        with running_server() as served:
            gateway_costs(served.endpoint(tenant.slug, agent_id), token_for_user(user=member.user))
            served_costs(served.base_url, token_for_user(user=member.user), tenant.slug, tool_id,
                         served.endpoint(tenant.slug, agent_id))
        _write_results()
        return
    warm_then_count("chat turn (text answer)", turn)

    def tool_turn() -> None:
        llm.script += [call("inventory__get_inventory", {"sku": "DEMO-001"}), text("twelve")]
        body = chat(member, agent_id, "stock?", conversation_id=conversation.get("id"))
        assert body["status"] == "completed" and body["events"], body

    llm.repeat_last = False
    warm_then_count("chat turn (one tool call)", tool_turn)

    def fresh_turn() -> None:  # the load mix's chat: a new conversation each time, one tool call, then the answer
        llm.script += [call("inventory__get_inventory", {"sku": "DEMO-001"}), text("twelve")]
        body = chat(member, agent_id, "How many DEMO-001 are in stock?")
        assert body["status"] == "completed" and body["events"], body

    warm_then_count("chat turn (new conversation, one tool call)", fresh_turn)
    if os.environ.get("REQUEST_COSTS_CHAT_ONLY"):  # the REST and chat kinds, without the served ones
        _write_results()
        return

    with running_server() as served:
        gateway_costs(served.endpoint(tenant.slug, agent_id), token_for_user(user=member.user))
        served_costs(served.base_url, token_for_user(user=member.user), tenant.slug, tool_id,
                     served.endpoint(tenant.slug, agent_id))
    _write_results()


def _write_results() -> None:
    out = os.environ.get("REQUEST_COSTS_OUT")
    if out:
        Path(out).write_text(json.dumps(RESULTS, indent=1))


# ---- the command -------------------------------------------------------------------------------------------


def table(now: dict[str, dict[str, int]], before: dict[str, dict[str, int]] | None) -> str:
    width = max(len(kind) for kind in now)
    cols = ["sql", "redis_trips", "redis_commands", *(["cpu_us", "thread_us", "wall_us"] if any(
        "cpu_us" in got for got in now.values()) else [])]
    head = f"{'request (warm)':<{width}}  " + "  ".join(f"{c:>14}" for c in cols)
    lines = [head, "-" * len(head)]
    for kind, got in now.items():
        cells = []
        for c in cols:
            was = (before or {}).get(kind, {}).get(c)
            cells.append(f"{(f'{was} -> ' if was is not None else '') + str(got.get(c, '-')):>14}")
        lines.append(f"{kind:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--save", help="write the counts to this JSON file")
    parser.add_argument("--compare", help="a JSON file saved by an earlier run: print before -> now")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every counted SQL statement")
    args = parser.parse_args()
    import tempfile

    import pytest

    out = args.save or tempfile.mktemp(suffix=".json")
    os.environ["REQUEST_COSTS_OUT"] = out
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    if args.verbose:
        os.environ["REQUEST_COSTS_VERBOSE"] = "1"
    if os.environ.get("REQUEST_COSTS_REMOTE"):
        os.environ.setdefault("DB_CONN_MAX_AGE", "600")  # pooled in production: no connect per served request
    if not os.environ.get("REDIS_URL"):
        print("REDIS_URL is not set: the cache is in process memory, Redis counts are 0", file=sys.stderr)
    os.chdir(ROOT)
    import django

    django.setup()  # the conftests loaded as plugins import models before pytest-django would set up
    code = pytest.main([str(Path(__file__).resolve()), "-q", "-s", "-p", "no:cacheprovider", "-p", "tests.conftest",
                        "-p", "tests.agents_app.conftest", "-o", "python_files=request_costs.py",
                        "-o", "timeout=600", "--rootdir", str(ROOT)])
    if code != 0 or not Path(out).exists():
        raise SystemExit(code or 1)
    now = json.loads(Path(out).read_text())
    before = json.loads(Path(args.compare).read_text()) if args.compare else None
    print()
    print(table(now, before))


if __name__ == "__main__":
    main()
