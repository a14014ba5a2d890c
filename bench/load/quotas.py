"""Quota phase of the load suite (`run.py --quotas SECONDS`): quotas hold on the production topology, and one tenant
hammering past its quota leaves another tenant's latency alone (issue 39).

On the topology run.py started (two web processes, two runners, its own PostgreSQL and Redis) it adds tenant A
(`quota-a`: an owner and --quota-members members with their own API tokens, its own sandboxed inventory server and an
agent for the gateway) and gives A's tool a quota of --quota-per-minute calls per minute and --quota-concurrent calls
at once. Tenant B is run.py's own tenant `prod` and its mixed workload (locustfile.py: list, invoke, gateway, chat).
Tenant C (`quota-c`) has --quota-local-tools LOCAL tools that A's users hammer too, so that C takes its whole fair share
of the runners' server slots (B must not starve; A's quota'd tool, in its own tenant, keeps its server).
Per round (--quota-rounds):
1. B alone for SECONDS at --quota-b-users users: B's p95 unloaded;
2. A's --quota-a-users users (quota_locustfile.py: invokes and gateway tools/call of A's tool, no wait between
   requests, alternating between both web processes) saturate A's quota while B runs the same mix again: B's p95
   loaded. The loaded phase is placed so that it crosses a UTC minute boundary (the per-minute window's reset).
   With --quota-modes hammer,polite a second loaded phase has A's users honour Retry-After.
It prints, from the server side (never from A's client): A's admitted calls per UTC minute window from the audit
table (a call's window by its start, created_at - cost_ms) and from the Redis counters, against the limit; the most
calls of A that ran at once (audit intervals, and the Redis concurrency counter sampled every 10 ms); the overshoot
(goal ≤ 1 call); from A's answers, that every refusal is typed QUOTA_EXCEEDED with a Retry-After (header in the API,
`details.retry_after` in the gateway) that points at the window's reset; B's p95 loaded / unloaded (goal ≤ 1.2) and
B's errors. The load average is printed with every phase: on a shared machine a p95 ratio may be noise.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
TENANT_A = "quota-a"
# The slot hog: its LOCAL tools, hammered by A's users too, take C's whole fair share of the runners' server slots. Not
# tenant A itself: a tenant's share is shared by its own tools, and A's quota'd tool, called 30 times a minute, is the
# least recently used of A's servers, so it would be evicted for the hog's and its admitted calls refused
# capacity_exceeded (what the first runs of this phase saw: A's admitted calls mostly EXECUTION_ERROR).
TENANT_C = "quota-c"
# A call whose start lies this close after a minute boundary may have been admitted in the window before (admission
# precedes the runtime call by a few ms): it is counted in both windows for the worst case.
EDGE_S = 0.25


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("quota phase (bench/load/quotas.py)")
    group.add_argument("--quotas", type=int, default=0, metavar="SECONDS",
                       help="run the quota phase with load phases of SECONDS (0: no quota phase)")
    group.add_argument("--quota-rounds", type=int, default=2)
    group.add_argument("--quota-a-users", type=int, default=24, help="users of tenant A hammering its quota")
    group.add_argument("--quota-b-users", type=int, default=8, help="users of tenant B's mixed workload")
    group.add_argument("--quota-members", type=int, default=4, help="members of tenant A (one token each)")
    group.add_argument("--quota-per-minute", type=int, default=30)
    group.add_argument("--quota-concurrent", type=int, default=3)
    group.add_argument("--quota-modes", default="hammer",
                       help="A's clients per loaded phase: hammer (ignore Retry-After), polite (honour it); comma list")
    group.add_argument("--quota-local-tools", type=int, default=4,
                       help="LOCAL tools of a third tenant C (quota-c) that A's users hammer too (each its own server on "
                            "a runner), so that C takes what the runners' fair share of server slots lets it (0: none)")
    group.add_argument("--quota-local-concurrent", type=int, default=2,
                       help="the concurrent quota of each of those tools (the tool scope's default)")
    group.add_argument("--quota-runner-slots", type=int, default=8,
                       help="server slots of each runner in the quota run (TOOLHUB_POOL_MAX_TOTAL; 0: the default)")


def topology_env(args: argparse.Namespace) -> dict[str, str]:
    """Settings the topology's processes need for the quota phase: few server slots per runner, so that tenant C's
    LOCAL tools reach its fair share of them (max(1, slots // (tenants holding slots + 1)) per runner: 8 // 4 = 2 with
    A, B and C holding slots)."""
    if not args.quotas or not args.quota_runner_slots:
        return {}
    return {"TOOLHUB_POOL_MAX_TOTAL": str(args.quota_runner_slots)}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class TenantA:
    """What the phase set up for tenant A."""

    def __init__(self, tenant_id: int, owner: str, tokens: list[str], tool_id: int, tool_name: str, agent_id: int,
                 quota: dict[str, Any], spread: list[int] | None = None, spread_tenant_id: int = 0,
                 spread_token: str = "") -> None:
        self.tenant_id, self.owner, self.tokens = tenant_id, owner, tokens
        self.tool_id, self.tool_name, self.agent_id, self.quota = tool_id, tool_name, agent_id, quota
        # Tenant C's LOCAL tools (the fair share of the runners' server slots), C's id and its owner's token.
        self.spread = spread or []
        self.spread_tenant_id, self.spread_token = spread_tenant_id, spread_token

    def key(self, suffix: str) -> str:
        """A Redis counter of the tool quota (tools_app.services.quotas.applicable names them)."""
        return f"toolhub:quota:{self.tenant_id}:tool:{self.tool_id}:{suffix}"


def _manage_env(load: ModuleType) -> dict[str, str]:
    sys.path.insert(0, str(load.ROOT / "deploy"))
    import prod_local

    # The topology's own Redis database (run.py: prod_topology(redis_db=1)), where the quota counters and the folded
    # refusals live: a manage.py run here must read the same one.
    prod_local.DB_NAME, prod_local.PG, prod_local.REDIS_DB = load.DB, load.STACK.pg.url, 1
    ports = tuple(int(h.rsplit(":", 1)[1]) for h in load.STACK.hosts[:2])
    return dict(prod_local.environment((ports[0], ports[1]), load.STACK.redis.url))


def setup_tenant_a(load: ModuleType, members: int, per_minute: int, concurrent: int, local_tools: int = 0,
                   local_concurrent: int = 2) -> TenantA:
    """Tenant A, its owner and members (one manage.py shell), then its tool, agent and the tool's quota (the API)."""
    import httpx2

    code = (
        "from tenants_app.services import tenant_create, membership_add, token_for_user\n"
        f"tenant = tenant_create(slug={TENANT_A!r}, name='Quota A', actor=None)\n"
        "print('tenant-id', tenant.pk)\n"
        "o = membership_add(tenant=tenant, actor=None, create_user=True, username='quota-a-owner', role='owner')\n"
        "print('owner-token', token_for_user(user=o.user))\n"
        f"for i in range({members}):\n"
        "    m = membership_add(tenant=tenant, actor=None, create_user=True, username=f'quota-a-member-{i + 1}', "
        "role='member')\n"
        "    print('member-token', token_for_user(user=m.user))\n"
        f"c = tenant_create(slug={TENANT_C!r}, name='Quota C', actor=None)\n"
        "print('c-tenant-id', c.pk)\n"
        "co = membership_add(tenant=c, actor=None, create_user=True, username='quota-c-owner', role='owner')\n"
        "print('c-owner-token', token_for_user(user=co.user))\n")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=load.ROOT, env=_manage_env(load),
                         check=True, capture_output=True, text=True).stdout.split("\n")
    tenant_id = int(next(line.split()[1] for line in out if line.startswith("tenant-id ")))
    owner = next(line.split()[1] for line in out if line.startswith("owner-token "))
    tokens = [line.split()[1] for line in out if line.startswith("member-token ")]
    c_id = int(next(line.split()[1] for line in out if line.startswith("c-tenant-id ")))
    c_owner = next(line.split()[1] for line in out if line.startswith("c-owner-token "))
    if len(set(tokens)) != members:
        raise SystemExit(f"expected {members} member tokens of tenant A, got {len(set(tokens))}")
    c = httpx2.Client(base_url=load.STACK.hosts[0], headers={"Authorization": f"Token {owner}", "X-Tenant": TENANT_A},
                      timeout=60)
    tool = c.post("/api/v1/tools/", json={"name": "quota-inventory", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(load.ROOT / "toolhub_demo" / "inventory_server.py")],
        "startup_timeout_s": 60}}).json()
    refreshed = c.post(f"/api/v1/tools/{tool['id']}/refresh/")
    if refreshed.status_code != 200 or not refreshed.json().get("ok"):
        raise SystemExit(f"tenant A's sandboxed inventory server did not start: {refreshed.text[:500]}")
    agent = c.post("/api/v1/agents/", json={"name": "quota-agent", "model": None,
                                            "tools": [{"tool": tool["id"]}]}).json()
    assert "id" in agent, agent
    quota = c.post("/api/v1/quotas/", json={"scope": "tool", "target": str(tool["id"]), "per_minute": per_minute,
                                            "concurrent": concurrent})
    if quota.status_code not in (200, 201):
        raise SystemExit(f"the quota was not created: {quota.status_code} {quota.text[:300]}")
    spread = []
    c = httpx2.Client(base_url=load.STACK.hosts[0], headers={"Authorization": f"Token {c_owner}", "X-Tenant": TENANT_C},
                      timeout=60)
    for i in range(local_tools):
        made = c.post("/api/v1/tools/", json={"name": f"quota-spread-{i + 1}", "type": "LOCAL", "config": {
            "command": sys.executable, "args": [str(load.ROOT / "toolhub_demo" / "inventory_server.py")],
            "startup_timeout_s": 60}}).json()
        c.post(f"/api/v1/tools/{made['id']}/refresh/")  # its functions (a probe may meet C's share: retried below)
        spread.append(int(made["id"]))
    if spread:
        # Each of them: C's tool scope's default quota.
        default = c.post("/api/v1/quotas/", json={"scope": "tool", "concurrent": local_concurrent})
        if default.status_code not in (200, 201):
            raise SystemExit(f"the default tool quota was not created: {default.status_code} {default.text[:300]}")
    return TenantA(tenant_id, owner, tokens, int(tool["id"]), str(tool["name"]), int(agent["id"]), quota.json(),
                   spread, c_id, c_owner)


class RunnerSampler(threading.Thread):
    """Polls every runner's pool (`GET /v1/stats`, the runner secret) while a loaded phase runs: the most server slots
    each tenant held on each runner, and how many idle servers the runners evicted to make room."""

    def __init__(self, client: Any, secret: str) -> None:
        super().__init__(daemon=True)
        self.client, self.secret = client, secret
        self.stop = threading.Event()
        self.peaks: dict[str, dict[str, int]] = {}  # runner id -> tenant -> most slots held at once
        self.first: dict[str, dict[str, int]] = {}
        self.last: dict[str, dict[str, int]] = {}
        self.max_total: dict[str, int] = {}

    def _runners(self) -> dict[str, str]:
        import json

        out = {}
        for key in self.client.scan_iter(match="toolhub:runner:*"):
            if key.endswith(b":drain"):
                continue
            try:
                info = json.loads(self.client.get(key) or b"{}").get("info") or {}
            except ValueError:
                continue
            if info.get("url"):
                out[str(info["id"])] = str(info["url"])
        return out

    def run(self) -> None:
        import httpx2

        http = httpx2.Client(headers={"Authorization": f"Bearer {self.secret}"}, timeout=5, trust_env=False)
        runners: dict[str, str] = {}
        looked = 0.0
        while not self.stop.is_set():
            if time.monotonic() - looked > 5:
                runners, looked = self._runners(), time.monotonic()
            for rid, url in runners.items():
                try:
                    stats = http.get(url + "/v1/stats").json()["stats"]
                except Exception:  # noqa: BLE001 - a runner busy or restarting: the next poll
                    continue
                peaks = self.peaks.setdefault(rid, {})
                for tenant, n in (stats.get("tenants") or {}).items():
                    peaks[str(tenant)] = max(peaks.get(str(tenant), 0), int(n))
                counters = {k: int(stats.get(k) or 0) for k in ("evicted", "processes_spawned", "sessions_opened")}
                self.first.setdefault(rid, counters)
                self.last[rid] = counters
            time.sleep(0.5)
        http.close()

    def summary(self) -> dict[str, Any]:
        return {rid: {"peak_slots_by_tenant": self.peaks.get(rid, {}),
                      **{k: self.last[rid][k] - self.first[rid][k] for k in self.last[rid]}}
                for rid in sorted(self.last)}


class Sampler(threading.Thread):
    """Polls A's Redis counters while the loaded phase runs: the concurrency counter's peak, each minute's count."""

    def __init__(self, client: Any, a: TenantA) -> None:
        super().__init__(daemon=True)
        self.client, self.a = client, a
        self.stop = threading.Event()
        self.peak_concurrent = 0
        self.minutes: dict[int, int] = {}

    def _minutes(self) -> None:
        for key in self.client.scan_iter(match=self.a.key("m:*")):
            value = self.client.get(key)
            minute = int(key.decode().rsplit(":", 1)[1])
            self.minutes[minute] = max(self.minutes.get(minute, 0), int(value or 0))

    def run(self) -> None:
        last = 0.0
        while not self.stop.is_set():
            self.peak_concurrent = max(self.peak_concurrent, int(self.client.get(self.a.key("c")) or 0))
            if time.monotonic() - last > 1:  # a minute key lives 2 minutes after its last count: read it often
                self._minutes()
                last = time.monotonic()
            time.sleep(0.01)
        self._minutes()


def _locust_a(load: ModuleType, locust_bin: Path, a: TenantA, users: int, seconds: int, tag: str,
              polite: bool) -> subprocess.Popen[bytes]:
    log = load.OUT / f"{tag}-a-events.tsv"
    log.unlink(missing_ok=True)
    env = {**os.environ, "LOAD_HOSTS": ",".join(load.STACK.hosts), "LOAD_TOKENS": ",".join(a.tokens),
           "LOAD_TENANT": TENANT_A, "LOAD_TOOL_ID": str(a.tool_id), "LOAD_AGENT_ID": str(a.agent_id),
           "LOAD_TOOL_NAME": a.tool_name, "QUOTA_EVENT_LOG": str(log), "QUOTA_POLITE": "1" if polite else "0",
           "LOAD_SPREAD_TOOLS": ",".join(str(t) for t in a.spread), "LOAD_SPREAD_TENANT": TENANT_C,
           "LOAD_SPREAD_TOKEN": a.spread_token}
    return subprocess.Popen(
        [str(locust_bin), "-f", str(HERE / "quota_locustfile.py"), "--headless", "-u", str(users), "-r", str(users),
         "-t", f"{seconds}s", "--csv", str(load.OUT / f"{tag}-a"), "--only-summary", "--stop-timeout", "5"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(load.OUT / f"{tag}-a.log", "wb"))


def _rows(load: ModuleType, tag: str) -> dict[str, dict[str, float]]:
    """Locust's per-request-name summary of a run: count, failures, p50, p95."""
    out = {}
    with open(load.OUT / f"{tag}_stats.csv") as fh:
        for r in csv.DictReader(fh):
            n = float(r["Request Count"])
            out[r["Name"]] = {"n": n, "failures": float(r["Failure Count"]), "rps": float(r["Requests/s"]),
                              "p50": float(r["50%"]), "p95": float(r["95%"])}
    return out


def _starved(load: ModuleType, tag: str) -> int:
    """B's requests refused for want of a runner server slot (the fair share failing B): goal 0."""
    path = load.OUT / f"{tag}_failures.csv"
    if not path.exists():
        return 0
    with open(path) as fh:
        return sum(int(r["Occurrences"]) for r in csv.DictReader(fh) if "capacity_exceeded" in r["Error"])


def _b_run(load: ModuleType, locust_bin: Path, b_env: dict[str, str], users: int, seconds: int,
           tag: str) -> dict[str, Any]:
    load.locust(locust_bin, b_env, users, seconds, tag).wait()
    rows = _rows(load, tag)
    return {"rows": rows, "load": _load(), "starved": _starved(load, tag)}


def _align(seconds: int) -> None:
    """Sleep until the next loaded phase (A starts 2 s before B) crosses a UTC minute boundary near its middle."""
    if seconds >= 55:
        return
    start_at = 60 - seconds / 2 - 2  # second of the minute A starts at
    wait = (start_at - time.time() % 60) % 60
    time.sleep(wait)


def _loaded(load: ModuleType, locust_bin: Path, b_env: dict[str, str], a: TenantA, args: argparse.Namespace,
            tag: str, polite: bool, redis_client: Any) -> dict[str, Any]:
    sampler = Sampler(redis_client, a)
    sampler.start()
    slots = RunnerSampler(redis_client, _manage_env(load)["TOOLHUB_RUNNER_SECRET"])
    slots.start()
    began = time.time()
    proc = _locust_a(load, locust_bin, a, args.quota_a_users, args.quotas + 4, tag, polite)
    time.sleep(2)  # A's users are all hammering before B starts
    b = _b_run(load, locust_bin, b_env, args.quota_b_users, args.quotas, f"{tag}-b")
    proc.wait()
    sampler.stop.set()
    slots.stop.set()
    sampler.join(5)
    slots.join(10)
    return {"b": b, "began": began, "ended": time.time(), "peak_concurrent_redis": sampler.peak_concurrent,
            "runners": slots.summary(),
            "redis_minutes": sampler.minutes, "events": _events(load.OUT / f"{tag}-a-events.tsv")}


def _events(path: Path) -> list[tuple[float, str, int, str, str, str, float]]:
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        p = line.split("\t")
        if len(p) == 7:
            out.append((float(p[0]), p[1], int(p[2]), p[3], p[4], p[5], float(p[6])))
    return out


def judge_refusals(events: list[tuple[float, str, int, str, str, str, float]]) -> dict[str, Any]:
    """A's answers: outcomes by path, refusals typed with a Retry-After, and whether it points at the reset."""
    outcomes: Counter[str] = Counter()
    limits: Counter[str] = Counter()
    untyped_refusals = no_retry_after = wrong_reset = 0
    for t, kind, status, outcome, limit, retry_after, latency_ms in events:
        outcomes[f"{kind} {outcome}"] += 1
        if outcome != "QUOTA_EXCEEDED" or kind == "local":  # the spread tools' refusals: counted in outcomes only
            continue
        limits[limit or "?"] += 1
        if kind == "invoke" and status != 429:
            untyped_refusals += 1
        if not retry_after:
            no_retry_after += 1
            continue
        if limit == "per_minute":
            # Refused somewhere between the request's start and its answer; Retry-After = ceil(reset - then).
            sent = t - latency_ms / 1000
            ok = any(abs(now + float(retry_after) - (math.floor(now / 60) + 1) * 60) <= 1.5 for now in (sent, t))
            wrong_reset += not ok
        elif float(retry_after) < 1:
            wrong_reset += 1
    return {"outcomes": dict(outcomes), "refused_by_limit": dict(limits), "refusals_not_429": untyped_refusals,
            "refusals_without_retry_after": no_retry_after, "retry_after_not_at_reset": wrong_reset}


def audit_windows(load: ModuleType, a: TenantA) -> dict[str, Any]:
    """A's admitted calls per UTC minute from the audit table, their worst-case count with calls at a window's edge
    counted in both windows, refusals, and the most admitted calls whose runtime intervals overlap."""
    import psycopg

    with psycopg.connect(load.pg_url()) as conn:
        rows = conn.execute("SELECT extract(epoch FROM created_at)::float8, cost_ms, status, error_code, via, call_count, "
                            "left(error, 200) "
                            "FROM tools_app_toolcall WHERE tool_id = %s ORDER BY created_at", (a.tool_id,)).fetchall()
    admitted: dict[int, int] = defaultdict(int)
    worst: dict[int, int] = defaultdict(int)
    refused: dict[int, int] = defaultdict(int)
    other: Counter[str] = Counter()
    by_via: Counter[str] = Counter()
    edges: list[tuple[float, int]] = []
    refusal_rows = 0
    for created, cost_ms, status, code, via, count, error in rows:
        start = float(created) - int(cost_ms) / 1000
        minute = int(start // 60)
        if code == "QUOTA_EXCEEDED":
            refused[minute] += int(count)  # a row of folded refusals stands for `count` (tools_app.services.quota_refusals)
            refusal_rows += 1
            continue
        if status not in ("ok", "error"):
            other[f"{status} {code}"] += 1
            continue
        if status == "error":  # a runner's fair share refusing the server is named: it is not the tool failing
            other[f"error {'capacity_exceeded' if 'capacity_exceeded' in (error or '') else code}"] += 1
        admitted[minute] += 1
        by_via[via or "api"] += 1
        worst[minute] += 1
        if start - minute * 60 < EDGE_S:
            worst[minute - 1] += 1
        edges += [(start, 1), (float(created), -1)]
    peak = running = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):  # an end before a start at the same instant
        running += step
        peak = max(peak, running)
    return {"admitted": dict(admitted), "worst": dict(worst), "refused": dict(refused), "other": dict(other),
            "admitted_via": dict(by_via), "peak_overlap": peak, "rows": len(rows), "refusal_rows": refusal_rows,
            "refusals": sum(refused.values())}


def fold_refusals(load: ModuleType) -> str:
    """Write the refusals counted in Redis into the audit table now (beat does it a minute or two after each minute;
    the phase reads the audit table at once)."""
    code = ("import time\nfrom tools_app.services.quota_refusals import fold\n"
            "print('folded', fold(now=time.time() + 180))\n")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=load.ROOT, env=_manage_env(load),
                         capture_output=True, text=True)
    return next((line for line in out.stdout.splitlines() if line.startswith("folded")), out.stderr[-300:])


def _utc(minute: int) -> str:
    return time.strftime("%H:%M", time.gmtime(minute * 60))


def phase(load: ModuleType, locust_bin: Path, b_env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """The whole quota phase; `load` is run.py's module (its topology, Locust runner and paths)."""
    import redis

    per_minute, concurrent = args.quota_per_minute, args.quota_concurrent
    a = setup_tenant_a(load, args.quota_members, per_minute, concurrent, args.quota_local_tools,
                       args.quota_local_concurrent)
    redis_client = redis.Redis.from_url(f"{load.STACK.redis.url}/1")  # prod_topology(redis_db=1)
    print(f"quota phase: tenant {TENANT_A} ({len(a.tokens)} members, tool {a.tool_id}) has a tool quota of "
          f"{per_minute}/min and {concurrent} at once; tenant prod (B) runs the mixed workload; "
          f"{args.quota_rounds} round(s) of {args.quotas}s phases; load average {_load()}", flush=True)
    modes = [m.strip() for m in args.quota_modes.split(",") if m.strip()]
    rounds: list[dict[str, Any]] = []
    for index in range(args.quota_rounds):
        r: dict[str, Any] = {"unloaded": _b_run(load, locust_bin, b_env, args.quota_b_users, args.quotas,
                                                f"q{index + 1}-b-unloaded")}
        for mode in modes:
            _align(args.quotas)
            r[mode] = _loaded(load, locust_bin, b_env, a, args, f"q{index + 1}-{mode}", mode == "polite",
                              redis_client)
        rounds.append(r)
    print(f"refusals counted in Redis written to the audit table: {fold_refusals(load)}", flush=True)
    audit = audit_windows(load, a)
    return report(a, rounds, audit, modes, per_minute, concurrent, args.quota_runner_slots)


def _p95(b: dict[str, Any], name: str = "Aggregated") -> float:
    return float(b["rows"].get(name, {}).get("p95", float("nan")))


def report(a: TenantA, rounds: list[dict[str, Any]], audit: dict[str, Any], modes: list[str], per_minute: int,
           concurrent: int, runner_slots: int = 0) -> dict[str, Any]:
    """Print the phase's findings and answer them as a dict (report.json's `quotas`)."""
    redis_minutes: dict[int, int] = {}
    peak_redis = 0
    for r in rounds:
        for mode in modes:
            for minute, n in r[mode]["redis_minutes"].items():
                redis_minutes[minute] = max(redis_minutes.get(minute, 0), n)
            peak_redis = max(peak_redis, r[mode]["peak_concurrent_redis"])
    print(f"A's admitted calls per UTC minute (limit {per_minute}): audit rows by start | worst case with calls "
          f"within {EDGE_S}s after a boundary counted in both windows | Redis counter | refused (audit)")
    overshoot = -per_minute
    for minute in sorted(set(audit["admitted"]) | set(audit["refused"]) | set(redis_minutes)):
        n, worst = audit["admitted"].get(minute, 0), audit["worst"].get(minute, 0)
        overshoot = max(overshoot, n - per_minute)
        print(f"  {_utc(minute)}  {n:5d} | {worst:5d} | {redis_minutes.get(minute, '-')!s:>5} | "
              f"{audit['refused'].get(minute, 0):6d}")
    worst_overshoot = max((n - per_minute for n in audit["worst"].values()), default=-per_minute)
    print(f"  max overshoot of the per-minute limit: {overshoot} call(s) (worst case {worst_overshoot}; goal ≤ 1)")
    print(f"  most of A's calls running at once: {audit['peak_overlap']} by the audit rows' intervals (a lower bound: "
          f"a slot is held a little longer than the call runs), {peak_redis} by the Redis counter sampled every 10 ms "
          f"(limit {concurrent}; goal ≤ {concurrent + 1})")
    print(f"  A's admitted calls by path: {audit['admitted_via']}")
    print(f"  A's refused calls of that tool: {audit['refusals']} in {audit['refusal_rows']} audit row(s) (the first "
          "refusal of each minute per member, function and path its own row, the rest folded into one row per minute)")
    if audit["other"]:
        print(f"  A's other audit rows: {audit['other']}")
    out: dict[str, Any] = {"tenant_a": {"tool": a.tool_id, "per_minute": per_minute, "concurrent": concurrent},
                           "audit": audit, "redis_minutes": redis_minutes, "overshoot": overshoot,
                           "worst_overshoot": worst_overshoot, "peak_concurrent_redis": peak_redis, "rounds": []}
    for i, r in enumerate(rounds, 1):
        base = _p95(r["unloaded"])
        ro: dict[str, Any] = {"b_unloaded": r["unloaded"]}
        print(f"round {i}: B alone ({r['unloaded']['load']} load avg): p95 {base:.0f} ms, "
              f"{r['unloaded']['rows']['Aggregated']['rps']:.1f} req/s")
        for mode in modes:
            lo = r[mode]
            judged = judge_refusals(lo["events"])
            b_rows = lo["b"]["rows"]
            ratio = _p95(lo["b"]) / base if base else float("inf")
            a_total = len(lo["events"])
            span = max(lo["ended"] - lo["began"], 1)
            print(f"  A {mode} ({a_total} answers, {a_total / span:.0f}/s; load avg {lo['b']['load']}): {judged}")
            per_name = ", ".join(f"{name} {_p95(r['unloaded'], name):.0f}->{_p95(lo['b'], name):.0f}"
                                 for name in b_rows if name != "Aggregated")
            if a.spread:
                local = {k.split(" ", 1)[1]: n for k, n in judged["outcomes"].items() if k.startswith("local ")}
                print(f"    C's LOCAL tools ({len(a.spread)}, hammered by A's users; runners of "
                      f"{runner_slots or 'default'} server slots): "
                      f"{local}; B's requests refused for want of a server slot (starved): {lo['b']['starved']} "
                      f"(goal 0; unloaded {r['unloaded']['starved']})")
                for rid, seen in lo["runners"].items():
                    print(f"      runner {rid}: most slots held per tenant {seen['peak_slots_by_tenant']} (tenant "
                          f"{a.tenant_id} is A, {a.spread_tenant_id} C); idle servers evicted {seen['evicted']}, servers started "
                          f"{seen['processes_spawned']}")
            print(f"    B's p95 loaded {_p95(lo['b']):.0f} ms vs unloaded {base:.0f} ms: ratio {ratio:.2f} "
                  f"(goal ≤ 1.20); B errors {b_rows['Aggregated']['failures']:.0f} of {b_rows['Aggregated']['n']:.0f}; "
                  f"per request p95 ms unloaded->loaded: {per_name}")
            ro[mode] = {"b": lo["b"], "a": judged, "b_p95_ratio": round(ratio, 2), "a_answers": a_total,
                        "runners": lo["runners"], "b_starved": lo["b"]["starved"]}
        out["rounds"].append(ro)
    return out
