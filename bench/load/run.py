"""Load and fault suite against the two-web-process production topology (deploy/prod_local.py).

    make bench-load            # or: .venv/bin/python bench/load/run.py [--duration 30] [--users 32,128]
                               #     [--soak-calls 10000] [--skip-faults] [--fault-gap 20] [--contextforge no]

It runs on a PostgreSQL cluster and a Redis of its own (bench/load/services.py: initdb into var/bench-load/pg on a
free port, a passworded redis-server on another), which are the only ones its faults restart: the machine's
PostgreSQL (5432) and Redis (6379) are never touched, so it can run beside other people's tests. The topology has
two LOCAL server runners; its virtual users are --members members of one company, each with an API token of their
own. In one run (about 10 minutes on 2 CPUs) it prints:
- for 32 and 128 users of a mixed workload (list tools, invoke a warm MCP tool, gateway tools/call, chat with
  the fake model): throughput, p50/p95/p99, error rate;
- a soak of --soak-calls invokes: RSS and open fds of the web processes before and after, sandboxed MCP servers
  and runners before and after (found by process tree: bench/load/proctree.py);
- faults under load, one every --fault-gap seconds: SIGKILL of a web worker, a Redis restart, a PostgreSQL
  restart, SIGKILL of the sandboxed LOCAL server inside its runner, SIGKILL of that whole runner (the next call
  must start a new server, on another runner for the runner kill); per fault the failures by class (503 service_unavailable, typed codes,
  connections cut by the dying process, untyped 500s and hangs: goal 0), answers slower than 10 s, recovery
  time, failures after the service was back, audit rows lost (goal 0); then a clean run that must be error-free;
- the same mix without chat against IBM ContextForge (bench/_contextforge.py) over one streamable-HTTP
  upstream, side by side, with throughput and p50 ratios.
With --profile SECONDS it also records a web worker and a runner with py-spy during a 32-user mixed run and writes
the collapsed stacks and a summary of the hottest functions into bench/load/profile/ (see bench/load/PROFILE.md).
With --quotas SECONDS it runs the quota phase (bench/load/quotas.py): a second tenant saturating a tool quota over both
web processes while tenant prod's mix runs; overshoot per window and prod's p95 loaded vs unloaded.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quotas  # noqa: E402
import session_soak  # noqa: E402
from _common import free_port, prod_topology  # noqa: E402
from proctree import CpuMeter, Sandbox, Topology, own_supervisor  # noqa: E402
from services import OwnPostgres, OwnRedis  # noqa: E402

BENCH_VENV = ROOT / "var" / "bench-venv"
OUT = ROOT / "var" / "bench-load"
PROFILE_DIR = Path(__file__).resolve().parent / "profile"
DB = "toolhub_load"
RUNNERS = 2  # the runner kill needs another runner for the server to move to
SLOW_MS = 10_000  # an answer slower than this during a fault is reported as slow (a near-hang), ok or not


class Stack:
    """What the run started: its own PostgreSQL and Redis, and (once up) the topology's process tree."""

    pg: OwnPostgres
    redis: OwnRedis
    tree: Topology
    hosts: list[str]


STACK = Stack()
# Settings of the topology's processes a phase needs (the quota phase: the runners' server slots).
EXTRA_ENV: dict[str, str] = {}


def ensure_locust() -> Path:
    locust = BENCH_VENV / "bin" / "locust"
    stamp = BENCH_VENV / ".lock"
    lock = (Path(__file__).parent / "requirements.lock").read_text()
    if not locust.exists() or not stamp.exists() or stamp.read_text() != lock:
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
        subprocess.run([str(BENCH_VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                        "-r", str(Path(__file__).parent / "requirements.lock")], check=True)
        stamp.write_text(lock)
    return locust


@contextmanager
def topology() -> Iterator[tuple[list[str], str]]:
    """Own PostgreSQL and Redis, then prod_local on them with RUNNERS runners; yields (hosts, owner's token)."""
    STACK.pg = OwnPostgres(OUT / "pg")
    STACK.redis = OwnRedis(OUT / "redis")
    STACK.pg.start()
    try:
        STACK.redis.start()
        print(f"own PostgreSQL on 127.0.0.1:{STACK.pg.port} ({STACK.pg.bin}), own Redis on 127.0.0.1:"
              f"{STACK.redis.port} (password); the machine's 5432/6379 are not used", flush=True)
        env = {"TOOLHUB_THROTTLE_INVOKE": "1000000/min", "TOOLHUB_THROTTLE_CHAT": "1000000/min",
               "WEB_CONCURRENCY": os.environ.get("WEB_CONCURRENCY", "2"), "LOG_LEVEL": "WARNING",
               "TOOLHUB_PROD_LOCAL_PG": STACK.pg.url, "TOOLHUB_PROD_LOCAL_REDIS_URL": STACK.redis.url,
               # The sandboxed inventory server runs on this venv's interpreter: the sandbox must see it, and its
               # packages wherever they are (a venv layered on another by a .pth file reads the other's).
               "TOOLHUB_LOCAL_SANDBOX_RO_PATHS": ":".join(dict.fromkeys(
                   (sys.prefix, os.path.realpath(sys.prefix), sys.base_prefix,
                    *(p for p in sys.path if p.endswith("site-packages") and not p.startswith(sys.prefix))))), **EXTRA_ENV}
        with prod_topology(db=DB, redis_db=1, env=env, runners=RUNNERS) as (hosts, token):
            STACK.tree = Topology(own_supervisor())
            STACK.hosts = hosts
            yield hosts, token
    finally:
        STACK.redis.stop()
        STACK.pg.stop()


def pg_url() -> str:
    return f"{STACK.pg.url}/{DB}"


def create_members(hosts: list[str], count: int) -> list[str]:
    """`count` members (role member) of tenant `prod`, each with an API token of their own: the company whose
    people the virtual users are. Runs one manage.py shell in the topology's environment."""
    sys.path.insert(0, str(ROOT / "deploy"))
    import prod_local

    prod_local.DB_NAME, prod_local.PG = DB, STACK.pg.url
    ports = tuple(int(h.rsplit(":", 1)[1]) for h in hosts[:2])
    env = prod_local.environment((ports[0], ports[1]), STACK.redis.url)
    code = (
        "from tenants_app.models import Tenant\n"
        "from tenants_app.services import membership_add, token_for_user\n"
        "tenant = Tenant.objects.get(slug='prod')\n"
        f"for i in range({count}):\n"
        "    m = membership_add(tenant=tenant, actor=None, create_user=True, username=f'load-member-{i + 1}', "
        "role='member', password=None, email='')\n"
        "    print('member-token', token_for_user(user=m.user))\n")
    stdout = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True,
                            capture_output=True, text=True).stdout
    out = [line.split()[1] for line in stdout.splitlines() if line.startswith("member-token ")]
    if len(out) != count or len(set(out)) != count:
        raise SystemExit(f"expected {count} distinct member tokens, got {len(set(out))}")
    return out


def demo_model_script() -> Path:
    for candidate in (ROOT / "toolhub_demo" / "demo_model.py", ROOT / "tests" / "fixtures" / "fake_llm.py"):
        if candidate.exists():
            return candidate
    raise SystemExit("no demo model script found")


def setup(base: str, token: str, model_url: str) -> tuple[int, int, str]:
    import httpx2

    c = httpx2.Client(base_url=base, headers={"Authorization": f"Token {token}", "X-Tenant": "prod"}, timeout=60)
    suffix = str(int(time.time()))
    tool = c.post("/api/v1/tools/", json={"name": f"load-inventory-{suffix}", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(ROOT / "toolhub_demo" / "inventory_server.py")],
        "startup_timeout_s": 60}}).json()
    refreshed = c.post(f"/api/v1/tools/{tool['id']}/refresh/")
    if refreshed.status_code != 200 or not refreshed.json().get("ok"):
        raise SystemExit(f"the sandboxed inventory server did not start: {refreshed.text[:500]}")
    model = c.post("/api/v1/models/", json={"name": f"load-model-{suffix}", "base_url": model_url,
                                            "model": "demo", "api_key": "load-key"}).json()
    agent = c.post("/api/v1/agents/", json={"name": f"load-agent-{suffix}", "model": model["id"], "max_steps": 4,
                                            "system_prompt": "Answer stock questions.",
                                            "tools": [{"tool": tool["id"], "allowed_functions": None,
                                                       "requires_approval": False}]}).json()
    assert "id" in agent, agent
    return int(tool["id"]), int(agent["id"]), str(tool["name"])


def web_pids() -> list[int]:
    """gunicorn masters and workers of this run's topology (children of its own prod_local, not another's)."""
    return STACK.tree.web_pids()


def worker_pids() -> list[int]:
    return STACK.tree.web_workers()


def runner_sandboxes() -> list[Sandbox]:
    """Sandboxed LOCAL servers inside the runners (bwrap descendants of the runner processes)."""
    return [sb for boxes in STACK.tree.sandboxes_by_runner().values() for sb in boxes]


def footprint() -> tuple[int, int]:
    rss = fds = 0
    for pid in web_pids():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue
    return rss, fds


def fd_kinds() -> dict[str, int]:
    """Open fds of the web processes by kind: TCP/Unix sockets by peer (web clients, PostgreSQL, Redis, runners,
    other), pipes, anon inodes (epoll, eventfd), files. A leak per call or per session shows as one kind growing."""
    ports = {"postgresql": STACK.pg.port, "redis": STACK.redis.port}
    web_ports = {int(h.rsplit(":", 1)[1]) for h in STACK.hosts}
    runner_ports = set()
    for pid in STACK.tree.runners():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            runner_ports.add(int(argv[argv.index("--port") + 1]))
        except (OSError, ValueError, IndexError):
            continue
    inodes = _tcp_peers()
    out: dict[str, int] = {}
    for pid in web_pids():
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        for link in links:
            if link.startswith("socket:["):
                peer = inodes.get(link[8:-1])
                if peer is None:
                    kind = "socket (unix or listening)"
                else:
                    local, remote = peer
                    kind = next((f"socket to {name}" for name, port in ports.items() if remote == port), "")
                    kind = kind or ("socket to a runner" if remote in runner_ports else
                                    "socket from a client" if local in web_ports else "socket (other)")
            elif link.startswith("pipe:"):
                kind = "pipe"
            elif link.startswith("anon_inode:"):
                kind = link
            else:
                kind = "file"
            out[kind] = out.get(kind, 0) + 1
    return out


def _tcp_peers() -> dict[str, tuple[int, int]]:
    """inode -> (local port, remote port) of every TCP socket on the machine."""
    found: dict[str, tuple[int, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9:
                found[cols[9]] = (int(cols[1].rsplit(":", 1)[1], 16), int(cols[2].rsplit(":", 1)[1], 16))
    return found


def locust(locust_bin: Path, env: dict[str, str], users: int, seconds: int, tag: str) -> subprocess.Popen[bytes]:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{tag}-events.tsv").unlink(missing_ok=True)
    env = {**env, "LOAD_EVENT_LOG": str(OUT / f"{tag}-events.tsv")}
    return subprocess.Popen(
        [str(locust_bin), "-f", str(Path(__file__).parent / "locustfile.py"), "--headless", "-u", str(users),
         "-r", str(users), "-t", f"{seconds}s", "--csv", str(OUT / tag), "--only-summary", "--stop-timeout", "10"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(OUT / f"{tag}.log", "wb"))


def read_stats(tag: str) -> dict[str, float]:
    with open(OUT / f"{tag}_stats.csv") as fh:
        rows = {r["Name"]: r for r in csv.DictReader(fh)}
    agg = rows["Aggregated"]
    n = float(agg["Request Count"]) or 1
    return {"requests": n, "rps": float(agg["Requests/s"]), "p50": float(agg["50%"]), "p95": float(agg["95%"]),
            "p99": float(agg["99%"]), "error_rate": float(agg["Failure Count"]) / n}


def count_calls(log: Path) -> int:
    return sum(1 for _ in log.open()) if log.exists() else 0


def audit_rows_missing(log: Path) -> int:
    """Completed invokes of the whole run (the call log) without their audit row."""
    return audit_rows_missing_ids(log.read_text().split()) if log.exists() else 0




def gateway_rows_ok(since: float, until: float) -> int:
    import psycopg

    with psycopg.connect(pg_url()) as conn:
        row = conn.execute("SELECT count(*) FROM tools_app_toolcall WHERE via = 'gateway' AND status = 'ok' "
                           "AND created_at >= to_timestamp(%s) AND created_at <= to_timestamp(%s)",
                           (since - 1, until + 5)).fetchone()
    return int(row[0] if row else 0)


# (answered at, request name, outcome class or "ok", latency ms, the failure's text)
Event = tuple[float, str, str, float, str]


def read_events(tag: str) -> list[Event]:
    """(time the answer came, request name, outcome, latency ms, failure text) of every request of a Locust run."""
    out = []
    path = OUT / f"{tag}-events.tsv"
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = line.split("\t")
        if len(parts) >= 4:
            out.append((float(parts[0]), parts[1], parts[2], float(parts[3]), parts[4] if len(parts) > 4 else ""))
    return out


def wait_until(check: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until `check()` holds, or None."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if check():
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def kill_web_worker() -> str:
    before = set(worker_pids())
    victim = sorted(before)[0]
    FAULT_AT["at"] = time.time()
    os.kill(victim, signal.SIGKILL)
    back = wait_until(lambda: len(set(worker_pids()) - before) >= 1 and len(worker_pids()) >= len(before), 60)
    return f"gunicorn worker {victim} SIGKILLed; " + (
        f"its master started a new one in {back:.1f}s" if back is not None else "no new worker within 60s")


FAULT_AT: dict[str, float] = {}  # when a fault that looked first (which worker, runner, sandbox) actually struck


def cpu_ticks(pid: int) -> int:
    """utime + stime of `pid` (clock ticks), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


YOUNG_SANDBOX_S = 5.0


def age_s(pid: int) -> float:
    """How long `pid` has been running (0 when it is gone)."""
    try:
        started = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0
    return uptime - started / os.sysconf("SC_CLK_TCK")


def serving_sandbox(boxes: list[Sandbox], sample_s: float = 1.5) -> Sandbox | None:
    """The sandbox whose server answers the load's calls: the one whose processes used CPU over `sample_s` under
    load. A runner may also hold a health probe's short-lived sandbox (beat probes every LOCAL tool each minute)
    or, were placement to leak, an idle server of a key another runner owns: killing either tests nothing."""
    if not boxes:
        return None
    # A probe's sandbox lives a second or two and spends that starting its server (importing the SDK: more CPU than a
    # warm server spends on a second of calls), so a sandbox younger than that is only a candidate when no older
    # one is there.
    boxes = [sb for sb in boxes if age_s(sb.bwrap) >= YOUNG_SANDBOX_S] or boxes
    before = {sb.bwrap: sum(cpu_ticks(p) for p in sb.inside) for sb in boxes}
    time.sleep(sample_s)
    grew = {sb.bwrap: sum(cpu_ticks(p) for p in sb.inside) - before[sb.bwrap] for sb in boxes}
    busiest = max(boxes, key=lambda sb: grew[sb.bwrap])
    return busiest if grew[busiest.bwrap] > 0 else None


def kill_runner_server() -> str:
    """SIGKILL the sandboxed LOCAL server that serves the calls (the innermost process of its sandbox, on the runner
    that owns the tool's key); the next call must start a new one, on the same runner (nothing else moved)."""
    by_runner = STACK.tree.sandboxes_by_runner()
    boxes = [sb for found in by_runner.values() for sb in found]
    victim = serving_sandbox(boxes)
    if victim is None:
        return (f"no sandboxed LOCAL server under the runners serves calls ({len(boxes)} sandbox(es), none using "
                "CPU under load): nothing to kill, NOT tested")
    others = [sb for sb in boxes if sb.bwrap != victim.bwrap]
    FAULT_AT["at"] = time.time()
    os.kill(victim.server, signal.SIGKILL)
    old = {sb.bwrap for sb in boxes}

    def replacement() -> Sandbox | None:
        return next((sb for sb in runner_sandboxes() if sb.bwrap not in old), None)

    back = wait_until(lambda: replacement() is not None, 30)
    new = replacement()
    where = ("" if new is None else " on the same runner" if new.holder == victim.holder
             else f" on ANOTHER runner ({new.holder}: the key moved)")
    extra = (f"; {len(others)} other sandbox(es) under the runners at the kill (a health probe's, or a LEAK if it "
             f"stays: {', '.join(f'{sb.bwrap} in runner {sb.holder}' for sb in others)})" if others else "")
    return (f"sandboxed server {victim.server} (bwrap {victim.bwrap}, runner {victim.holder}, the one serving the "
            "calls) SIGKILLed; "
            + (f"the next call started a new sandbox {back:.1f}s later{where}" if back is not None
               else "NO new sandbox within 30s") + extra)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_runner() -> str:
    """SIGKILL the runner that holds the server (its sandbox must die with it); the next call must start the
    server on another runner. prod_local starts the killed runner again, as a service manager would."""
    looked = time.time()
    by_runner = STACK.tree.sandboxes_by_runner()
    holding = [r for r, boxes in by_runner.items() if boxes]
    if not holding:
        return f"no runner holds a sandboxed server ({len(by_runner)} runners): NOT tested"
    victim = holding[0]
    others = [r for r in by_runner if r != victim]
    orphans = {sb.bwrap for sb in by_runner[victim]}
    FAULT_AT["at"] = time.time()  # the kill itself: the process-tree scan above takes a while on a loaded machine
    os.kill(victim, signal.SIGKILL)
    moved = wait_until(lambda: any(STACK.tree.sandboxes([r]) for r in others), 30)
    back = wait_until(lambda: len(STACK.tree.runners()) >= len(by_runner) and victim not in STACK.tree.runners(), 60)
    wait_until(lambda: not any(_alive(pid) for pid in orphans), 5)
    left = [pid for pid in orphans if _alive(pid)]
    return (f"runner {victim} SIGKILLed ({len(by_runner[victim])} sandbox(es); "
            f"{FAULT_AT['at'] - looked:.2f}s after the look for it began); "
            + (f"the server was started on another runner {moved:.1f}s later" if moved is not None
               else "NO server on another runner within 30s")
            + (f"; the runner was started again in {back:.1f}s" if back is not None else "; runner NOT restarted")
            + (f"; {len(left)} sandbox(es) of the dead runner still alive (LEAK)" if left else
               "; its sandboxes died with it"))


def restart_redis_timed() -> str:
    t = time.monotonic()
    STACK.redis.restart()
    return f"the bench's own redis-server (port {STACK.redis.port}) down and up again in {time.monotonic() - t:.1f}s"


def restart_postgres_timed() -> str:
    t = time.monotonic()
    STACK.pg.restart()
    return f"the bench's own PostgreSQL (port {STACK.pg.port}) restarted in {time.monotonic() - t:.1f}s"


FAULTS: dict[str, tuple[str, Callable[[], str]]] = {
    "web": ("kill a web worker", kill_web_worker),
    "redis": ("restart Redis", restart_redis_timed),
    "pg": ("restart PostgreSQL", restart_postgres_timed),
    "mcp": ("kill the sandboxed MCP server in its runner", kill_runner_server),
    "runner": ("kill the runner", kill_runner),
}


def run_faults(locust_bin: Path, env: dict[str, str], call_log: Path, users: int, gap: int,
               which: list[str]) -> dict[str, object]:
    """One Locust run; every `gap` seconds a fault. Per fault: failures by class until the next, recovery time
    (fault to the last failure after which everything succeeded), the slowest answer, audit rows lost."""
    faults = [FAULTS[key] for key in which]
    warm = 8
    total = warm + gap * len(faults) + 2
    phase_start = time.time()
    proc = locust(locust_bin, env, users, total, "faults")
    time.sleep(warm)
    marks: list[tuple[str, float, int, str, float]] = []
    try:
        for i, (name, action) in enumerate(faults):
            at = time.time()
            lines = count_calls(call_log)
            what = action()
            # A fault that first looks at the load (which sandbox serves the calls) says when it struck: its window
            # starts there, not at the look.
            at = FAULT_AT.pop("at", at)
            marks.append((name, at, lines, what, time.time()))
            time.sleep(max(0.0, phase_start + warm + gap * (i + 1) - time.time()))
    finally:
        if not STACK.redis.ping():
            STACK.redis.restart()  # the bench's own Redis: the topology needs it for what follows
        proc.wait()
    phase_end = time.time()
    events = read_events("faults")
    ids = call_log.read_text().split()  # call ids, or "uid:<call_uid>" for a call whose audit row was spooled
    report: dict[str, object] = {}
    print(f"faults under load ({users} users, one every {gap}s; load average {os.getloadavg()[0]:.2f}):")
    for i, (name, at, first_line, what, back_at) in enumerate(marks):
        until = marks[i + 1][1] if i + 1 < len(marks) else phase_end
        last_line = marks[i + 1][2] if i + 1 < len(marks) else len(ids)
        print(f"  {name}: {what}")
        report[name] = fault_report([e for e in events if at <= e[0] < until], at=at, until=until, back_at=back_at,
                                    lost=audit_rows_missing_ids(ids[first_line:last_line]),
                                    completed=last_line - first_line)
    gw_ok = sum(1 for e in events if e[1] == "MCP tools/call" and e[2] == "ok")
    gw_rows = gateway_rows_ok(phase_start, phase_end)
    print(f"  gateway tools/call answered ok: {gw_ok}; gateway audit rows (ok) in the phase: {gw_rows} "
          f"({'none lost' if gw_rows >= gw_ok else f'{gw_ok - gw_rows} LOST'})")
    report["gateway_audit_lost"] = max(0, gw_ok - gw_rows)
    return report




def recovery_of(window: list[Event], failures: list[Event], *, at: float, until: float) -> tuple[bool, float]:
    """(recovered, seconds from the fault to the last failure after which everything succeeded)."""
    last_fail = max((e[0] for e in failures), default=None)
    if last_fail is None:
        return True, 0.0
    ok_after = [e for e in window if e[0] > last_fail and e[2] == "ok"]
    return bool(ok_after) and until - last_fail >= 2, last_fail - at


def fault_report(window: list[Event], *, at: float, until: float, back_at: float, lost: int,
                 completed: int) -> dict[str, object]:
    """One fault's window (the events from it to the next fault), printed and as the report's figures."""
    failures = [e for e in window if e[2] != "ok"]
    by_class: dict[str, int] = {}
    for e in failures:
        by_class[e[2]] = by_class.get(e[2], 0) + 1
    recovered, recovery = recovery_of(window, failures, at=at, until=until)
    untyped = sum(n for c, n in by_class.items() if c.startswith(("untyped", "timeout")) or "no Retry-After" in c)
    slowest = max((e[3] for e in window), default=0.0)
    classes = ", ".join(f"{c} {n}" for c, n in sorted(by_class.items(), key=lambda kv: -kv[1])) or "none"
    recovery_text = f"in {recovery:.1f}s" if recovered else "NOT within the window"
    after_back = sum(1 for e in failures if e[0] > back_at + 0.5)
    # A request sent after the kill (answer time minus latency) was not in flight when the process died.
    late = [e for e in failures if e[0] - e[3] / 1000 > at + 0.05]
    sent_after = len(late)
    slow = sum(1 for e in window if e[3] > SLOW_MS)
    print(f"    {len(failures)} of {len(window)} requests failed ({classes}); untyped/hung: {untyped}; "
          f"recovered {recovery_text}; slowest answer "
          f"{slowest / 1000:.1f}s; audit rows lost: {lost} of {completed} completed invokes")
    print(f"    failures later than 0.5s after the fault was over: {after_back}; failures of requests sent after "
          f"the fault began (not in flight; for a kill the goal is 0): {sent_after}; answers slower than "
          f"{SLOW_MS / 1000:.0f}s: {slow}")
    for e in late[:8]:  # what they were: sent how long after the fault, answered how, with which text
        print(f"      sent {e[0] - e[3] / 1000 - at:+.2f}s, answered {e[0] - at:+.2f}s after the fault: {e[1]} "
              f"{e[2]}: {e[4][:150]}")
    return {"failed": len(failures), "requests": len(window), "classes": by_class, "untyped": untyped,
            "recovery_s": round(recovery, 1) if recovered else None, "audit_lost": lost,
            "failed_after_back": after_back, "failed_sent_after_fault": sent_after, "slower_than_10s": slow}


def audit_rows_missing_ids(ids: list[str]) -> int:
    """Completed invokes without their audit row: by id, or by call_uid for rows spooled during an outage (a row
    still only in the spool after beat had its chance counts as missing)."""
    import psycopg

    numbers = sorted({int(x) for x in ids if not x.startswith("uid:")})
    uids = sorted({x.removeprefix("uid:") for x in ids if x.startswith("uid:")})
    if uids:
        # The topology's beat replays the spool every 30 s (the web processes on their next audit write): wait for it.
        spool = ROOT / "var" / "prod-local" / "audit-spool"
        deadline = time.monotonic() + 45
        while any(spool.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(1)
        print(f"  {len(uids)} completed invokes answered with a spooled audit row "
              f"({len(list(spool.glob('*.json')))} still spooled)")
    if not numbers and not uids:
        return 0
    with psycopg.connect(pg_url()) as conn:
        found = conn.execute("SELECT count(*) FROM tools_app_toolcall WHERE id = ANY(%s)", (numbers,)).fetchone()
        by_uid = conn.execute("SELECT count(*) FROM tools_app_toolcall WHERE call_uid::text = ANY(%s)",
                              (uids,)).fetchone()
    return len(numbers) + len(uids) - int(found[0] if found else 0) - int(by_uid[0] if by_uid else 0)


def read_rows(tag: str) -> dict[str, dict[str, float]]:
    """Per request name (and "Aggregated"): requests, req/s, p50/p95/p99 ms, error rate."""
    out = {}
    with open(OUT / f"{tag}_stats.csv") as fh:
        for r in csv.DictReader(fh):
            n = float(r["Request Count"]) or 1
            out[r["Name"]] = {"requests": float(r["Request Count"]), "rps": float(r["Requests/s"]),
                              "p50": float(r["50%"]), "p95": float(r["95%"]), "p99": float(r["99%"]),
                              "error_rate": float(r["Failure Count"]) / n}
    return out


def setup_remote(base: str, token: str, upstream: str) -> tuple[int, int, str]:
    """A REMOTE tool on the shared streamable-HTTP upstream and an agent (no model) exposing it."""
    import httpx2

    c = httpx2.Client(base_url=base, headers={"Authorization": f"Token {token}", "X-Tenant": "prod"}, timeout=60)
    name = f"cmp-inventory-{int(time.time())}"
    tool = c.post("/api/v1/tools/", json={"name": name, "type": "REMOTE",
                                          "config": {"url": upstream, "transport": "streamable_http"}}).json()
    assert c.post(f"/api/v1/tools/{tool['id']}/refresh/").status_code == 200
    agent = c.post("/api/v1/agents/", json={"name": f"cmp-agent-{int(time.time())}", "model": None,
                                            "tools": [{"tool": tool["id"]}]}).json()
    assert "id" in agent, agent
    return int(tool["id"]), int(agent["id"]), name


def combine_rounds(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """One row per request name over several rounds of the same phase: requests and failures summed, req/s and the
    percentiles the mean of the rounds' (a percentile of the union is not recoverable from locust's CSV)."""
    out: dict[str, dict[str, float]] = {}
    for name in set().union(*(r.keys() for r in rounds)):
        rows = [r[name] for r in rounds if name in r]
        requests = sum(row["requests"] for row in rows)
        failures = sum(row["requests"] * row["error_rate"] for row in rows)
        out[name] = {"requests": requests, "error_rate": failures / requests if requests else 0.0,
                     **{k: sum(row[k] for row in rows) / len(rows) for k in ("rps", "p50", "p95", "p99")}}
    return out


def compare_contextforge(locust_bin: Path, env: dict[str, str], hosts: list[str], token: str, users: int,
                         duration: int, rounds: int = 2) -> dict[str, object]:
    """The same list/invoke/gateway mix (no chat) against Toolhub and ContextForge over one upstream, in alternating
    rounds (Toolhub, ContextForge, Toolhub, ...) with both running, so a drift of the machine's speed during the
    comparison (this VM's moves 1.3-2x within minutes) falls on both sides alike instead of on whichever ran second."""
    import _contextforge
    from gateway import http_upstream

    executable, how = _contextforge.find_or_install()
    if executable is None:
        print(f"ContextForge comparison skipped: {how}")
        return {"skipped": how}
    workers = 2 * int(os.environ.get("WEB_CONCURRENCY", "2"))
    th_rounds: list[dict[str, dict[str, float]]] = []
    cf_rounds: list[dict[str, dict[str, float]]] = []
    with http_upstream() as upstream:
        tool_id, agent_id, name = setup_remote(hosts[0], token, upstream)
        th_env = {**env, "LOAD_TOOL_ID": str(tool_id), "LOAD_AGENT_ID": str(agent_id), "LOAD_TOOL_NAME": name,
                  "LOAD_CHAT": "0", "LOAD_CALL_LOG": str(OUT / "cmp-calls.txt")}
        load_th = os.getloadavg()[0]
        print(f"ContextForge {_contextforge.VERSION}: {how}; starting it ({workers} uvicorn workers, SQLite) ...",
              flush=True)
        try:
            with _contextforge.running(executable, upstream, workers=workers) as cf:
                cf_env = {**env, "LOAD_TARGET": "contextforge", "LOAD_HOSTS": cf.base, "LOAD_CF_BASE": cf.base,
                          "LOAD_CF_TOKEN": cf.token, "LOAD_CF_TOOL": cf.tool_name, "LOAD_CF_SERVER_URL": cf.server_url,
                          "LOAD_CALL_LOG": str(OUT / "cmp-calls-cf.txt")}
                for i in range(rounds):
                    locust(locust_bin, th_env, users, duration, f"cmp-toolhub-{i}").wait()
                    th_rounds.append(read_rows(f"cmp-toolhub-{i}"))
                    locust(locust_bin, cf_env, users, duration, f"cmp-contextforge-{i}").wait()
                    cf_rounds.append(read_rows(f"cmp-contextforge-{i}"))
                    t, c = th_rounds[-1].get("Aggregated"), cf_rounds[-1].get("Aggregated")
                    if t and c and c["rps"]:
                        print(f"  round {i + 1}: Toolhub {t['rps']:.1f} req/s, ContextForge {c['rps']:.1f} req/s "
                              f"({t['rps'] / c['rps']:.2f}x); load average {os.getloadavg()[0]:.2f}", flush=True)
        except RuntimeError as exc:
            print(f"ContextForge comparison skipped: it did not start or register the server: {exc}")
            return {"skipped": str(exc).splitlines()[0]}
    if not th_rounds or not cf_rounds:
        return {"skipped": "no round completed"}
    toolhub, forge = combine_rounds(th_rounds), combine_rounds(cf_rounds)
    print(f"Toolhub vs ContextForge {_contextforge.VERSION}, same mix without chat (3 list : 6 invoke : 2 gateway "
          f"tools/call), {users} users, {rounds} alternating rounds of {duration}s each (req/s and percentiles: the "
          f"rounds' mean), one streamable-HTTP upstream; Toolhub {workers} web workers "
          f"in 2 processes on PostgreSQL + Redis, ContextForge {workers} workers on SQLite; load average "
          f"{load_th:.2f} / {os.getloadavg()[0]:.2f}:")
    labels = {"GET /tools/": "list tools (GET /api/v1/tools/ | GET /tools)",
              "POST invoke": "invoke (POST /tools/{id}/invoke/ | POST /rpc tools/call)",
              "MCP tools/call": "gateway tools/call (/mcp/.../agents/{id}/ | /servers/{id}/mcp)",
              "Aggregated": "all requests (MCP initialize included)"}
    out: dict[str, object] = {}
    for key, label in labels.items():
        t, c = toolhub.get(key), forge.get(key)
        if not t or not c:
            continue
        print(f"  {label}")
        for who, r in (("Toolhub", t), ("ContextForge", c)):
            print(f"    {who:<13} {r['rps']:7.1f} req/s  p50 {r['p50']:5.0f} ms  p95 {r['p95']:5.0f} ms  "
                  f"p99 {r['p99']:5.0f} ms  errors {r['error_rate']:.2%}")
        ratio_rps = t["rps"] / c["rps"] if c["rps"] else float("inf")
        ratio_p50 = c["p50"] / t["p50"] if t["p50"] else float("inf")
        print(f"    ratio: Toolhub throughput {ratio_rps:.2f}x ContextForge's; ContextForge p50 {ratio_p50:.2f}x "
              f"Toolhub's")
        out[key] = {"toolhub": t, "contextforge": c, "throughput_ratio": round(ratio_rps, 2),
                    "p50_ratio_cf_over_toolhub": round(ratio_p50, 2)}
    # The mix itself: its three kinds' requests per second, without each virtual user's one-time MCP initialize and
    # initialized (the same count on both sides, 2 per user per round, so in "all requests" they pull the ratio
    # towards 1 the slower the target is). Per round too, to show the spread.
    mix = ("GET /tools/", "POST invoke", "MCP tools/call")

    def mix_rps(rows: dict[str, dict[str, float]]) -> float:
        return sum(rows[k]["rps"] for k in mix if k in rows)

    per_round = [round(mix_rps(t) / mix_rps(c), 2) for t, c in zip(th_rounds, cf_rounds, strict=True) if mix_rps(c)]
    t_mix, c_mix = mix_rps(toolhub), mix_rps(forge)
    if c_mix:
        print(f"  the mix (list + invoke + gateway tools/call; each user's one-time initialize left out): Toolhub "
              f"{t_mix:.1f} req/s, ContextForge {c_mix:.1f} req/s: {t_mix / c_mix:.2f}x (rounds: "
              f"{', '.join(f'{r:.2f}x' for r in per_round)})")
        out["mix"] = {"toolhub_rps": round(t_mix, 1), "contextforge_rps": round(c_mix, 1),
                      "throughput_ratio": round(t_mix / c_mix, 2), "rounds": per_round}
    return out


def cpu_meter(locust_pid: int) -> CpuMeter:
    """CPU per process class of the topology during a phase, with the load generator, PostgreSQL and Redis."""
    extra = {"locust (load generator)": locust_pid}
    postmaster = STACK.pg.postmaster()
    if postmaster is not None:
        extra["postgresql"] = postmaster
    if STACK.redis.proc is not None:
        extra["redis"] = STACK.redis.proc.pid
    return CpuMeter(STACK.tree, extra).start()


def print_cpu(cpu: dict[str, float], requests: float) -> None:
    """Where the machine's CPU went in a phase: per class, CPU seconds, share of the phase and ms per request."""
    wall, per = cpu["wall"] or 1.0, 1000.0 / (requests or 1.0)
    ours = {k: v for k, v in cpu.items() if k not in ("wall", "machine", "capacity")}
    others = max(0.0, cpu["machine"] - sum(ours.values()))
    print(f"    CPU over {wall:.0f}s (2 cores = {2 * wall:.0f} CPU-s; the machine used {cpu['machine']:.0f}, "
          f"{cpu['machine'] / (cpu['capacity'] or 1):.0%} of what it had):")
    for name, spent in sorted({**ours, "others on the machine": others}.items(), key=lambda kv: -kv[1]):
        print(f"      {name:<26} {spent:6.1f} CPU-s  {spent / wall:5.0%} of a core  {spent * per:5.2f} ms/request")


def print_stats(label: str, r: dict[str, float]) -> None:
    print(f"{label}: {r['rps']:.0f} req/s  p50 {r['p50']:.0f} ms  p95 {r['p95']:.0f} ms  p99 {r['p99']:.0f} ms  "
          f"errors {r['error_rate']:.2%}  ({r['requests']:.0f} requests)")


def soak(locust_bin: Path, env: dict[str, str], call_log: Path, calls: int, users: int) -> dict[str, float]:
    """Footprint after warm-up vs after `calls` more invokes; MCP server processes back to baseline."""
    rss0, fds0 = footprint()
    placed0 = placement()
    servers0, runners0 = sum(placed0.values()), len(STACK.tree.runners())
    start_calls = count_calls(call_log)
    samples = [(0, fd_kinds())]  # open fds by kind as the soak goes: a leak grows with the calls, a pool does not
    proc = locust(locust_bin, env, users, 3600, "soak")
    deadline = time.monotonic() + 900 * max(1, calls // 10000)
    while count_calls(call_log) - start_calls < calls and time.monotonic() < deadline:
        time.sleep(1)
        done = count_calls(call_log) - start_calls
        if done >= calls * len(samples) / 4 and len(samples) < 4:
            samples.append((done, fd_kinds()))
    stop_locust(proc)
    rss1, fds1 = footprint()
    done = count_calls(call_log) - start_calls
    samples.append((done, fd_kinds()))
    time.sleep(8)  # past the runners' keep-alive (5 s): what stays open once the load is over
    samples.append((-1, fd_kinds()))
    # A health probe (beat probes every LOCAL tool each minute) runs a short-lived sandbox of its own next to the
    # tool's server: the count is taken once that is over (a server that stays is one too many).
    settled = wait_until(lambda: sum(placement().values()) <= servers0, 30)
    placed1 = placement()
    servers1, runners1 = sum(placed1.values()), len(STACK.tree.runners())
    print(f"soak over {done} invokes ({users} users): web RSS {rss0 / 1024:.0f} -> {rss1 / 1024:.0f} MiB "
          f"({(rss1 - rss0) / max(rss0, 1):+.1%}), open fds {fds0} -> {fds1} ({(fds1 - fds0) / max(fds0, 1):+.1%}); "
          f"goal: within 10%")
    print("  open fds of the web processes by kind, as the soak went (invokes done; 'idle' 8 s after it):")
    for kind in sorted({k for _, kinds in samples for k in kinds}):
        print(f"    {kind:<28}" + "".join(f"{kinds.get(kind, 0):>6}" for _, kinds in samples))
    print(f"    {'total':<28}" + "".join(f"{sum(kinds.values()):>6}" for _, kinds in samples))
    print(f"    {'(at invokes)':<28}" + "".join(f"{n if n >= 0 else 'idle':>6}" for n, _ in samples))
    # The design: each server key runs on exactly one runner of the deployment (rendezvous placement), so the one
    # tool of the load has one sandbox in all, on its owner, and none under the web workers.
    print(f"sandboxed MCP servers (bwrap trees under web workers and runners): {servers0} before the soak "
          f"({placement_text(placed0)}), {servers1} after ({placement_text(placed1)}"
          f"{'' if settled is None else f'; settled {settled:.1f}s after the load'}) (goal: back to baseline: one per "
          f"tool, on its owning runner only); runners: {runners0} before, {runners1} after (goal: {RUNNERS})")
    return {"invokes": done, "rss_change": (rss1 - rss0) / max(rss0, 1), "fds_change": (fds1 - fds0) / max(fds0, 1),
            "servers_before": servers0, "servers_after": servers1, "runners_before": runners0,
            "runners_after": runners1, "holders_after": sum(1 for n in placed1.values() if n)}


def placement() -> dict[str, int]:
    """Sandboxed servers per holder: "runner <pid>" for each runner (0 included), "web <pid>" for a web worker
    that holds one (with runners, none should)."""
    out = {f"runner {pid}": len(boxes) for pid, boxes in STACK.tree.sandboxes_by_runner().items()}
    for sb in STACK.tree.sandboxes(STACK.tree.web_workers()):
        out[f"web {sb.holder}"] = out.get(f"web {sb.holder}", 0) + 1
    return out


def placement_text(placed: dict[str, int]) -> str:
    return ", ".join(f"{holder}: {n}" for holder, n in sorted(placed.items())) or "no holders"


def stop_locust(proc: subprocess.Popen[bytes]) -> None:
    """Stop an open-ended Locust run: SIGTERM (it stops its users and writes its CSVs; a SIGINT left it running a
    minute more on a loaded machine), then SIGKILL if it has not ended."""
    for sig, wait_s in ((signal.SIGTERM, 60), (signal.SIGKILL, 15)):
        if proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            print(f"  locust did not stop within {wait_s}s of {signal.Signals(sig).name}", flush=True)


def _frame(raw: str) -> str:
    """`func (path:line)` -> `func (short path)`: the line number dropped, the path relative to the checkout or
    to site-packages."""
    match = re.match(r"^(.*) \((.*?)(?::\d+)?\)$", raw.strip())
    if not match:
        return raw.strip()
    func, path = match.groups()
    for prefix in (str(ROOT) + "/", "site-packages/"):
        if prefix in path:
            path = path.split(prefix, 1)[1]
    return f"{func} ({path})"


def _own_packages() -> set[str]:
    """Toolhub's top-level packages (py-spy names files relative to their sys.path entry: `core/asgi.py`)."""
    return {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} | {"manage.py"}


def summarize_profile(collapsed: Path, top: int = 25) -> str:
    """The hottest functions of a py-spy raw (collapsed) profile: by own samples (the frame on top), by samples
    under each of Toolhub's own functions (inclusive, a frame counted once per stack), and by the deepest Toolhub
    frame of each stack (where Toolhub's code spends or hands off its time: the hot spots to look at)."""
    own_packages = _own_packages()

    def ours(frame: str) -> bool:
        path = frame.rsplit(" (", 1)[-1].rstrip(")")
        return path.split("/", 1)[0] in own_packages

    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    deepest: dict[str, int] = {}
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_frame(f) for f in stack.split(";") if "(" in f]
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0) + count
        mine = [f for f in frames if ours(f)]
        for frame in set(mine):
            inclusive[frame] = inclusive.get(frame, 0) + count
        if mine:
            deepest[mine[-1]] = deepest.get(mine[-1], 0) + count

    def block(title: str, counts: dict[str, int]) -> list[str]:
        return [title] + [f"  {n / max(total, 1):6.1%}  {name}"
                          for name, n in sorted(counts.items(), key=lambda kv: -kv[1])[:top]]

    lines = [f"{collapsed.name}: {total} samples (py-spy, 100 Hz, idle threads left out)"]
    lines += block("own time (the function on top of the stack):", own)
    lines += block("deepest Toolhub frame of each stack (time in or under it, below any other Toolhub frame):",
                   deepest)
    lines += block("inclusive time, Toolhub's own functions:", inclusive)
    return "\n".join(lines) + "\n"


def profile(locust_bin: Path, env: dict[str, str], users: int, seconds: int) -> dict[str, object]:
    """py-spy record of one web worker and of the runner holding the server for `seconds` of a `users`-user
    mixed run; the collapsed stacks and their summaries go to bench/load/profile/."""
    py_spy = BENCH_VENV / "bin" / "py-spy"
    PROFILE_DIR.mkdir(exist_ok=True)
    proc = locust(locust_bin, env, users, seconds + 15, f"profile-u{users}")
    time.sleep(8)  # every user started, the server warm
    holding = [r for r, boxes in STACK.tree.sandboxes_by_runner().items() if boxes] or STACK.tree.runners()
    targets = {"web-worker": worker_pids()[0], "runner": holding[0]}
    spies = {}
    for name, pid in targets.items():
        out = PROFILE_DIR / f"{name}-u{users}.collapsed.txt"
        spies[name] = (out, subprocess.Popen([str(py_spy), "record", "--pid", str(pid), "--duration", str(seconds),
                                              "--rate", "100", "--format", "raw", "--output", str(out),
                                              "--nonblocking"], stdout=subprocess.DEVNULL,
                                             stderr=open(OUT / f"py-spy-{name}.log", "wb")))
    report: dict[str, object] = {}
    for name, (out, spy) in spies.items():
        spy.wait()
        if spy.returncode != 0 or not out.exists():
            print(f"py-spy of the {name} failed (see {OUT / f'py-spy-{name}.log'})")
            continue
        text = summarize_profile(out)
        (PROFILE_DIR / f"{name}-u{users}.summary.txt").write_text(text)
        print(f"profile of a {name} at {users} users over {seconds}s:")
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("deepest"))
        print("\n".join("  " + line for line in lines[start:start + 13]))
        report[name] = str(out.relative_to(ROOT))
    proc.wait()
    report["stats"] = r = read_stats(f"profile-u{users}")
    print_stats(f"  the profiled run ({users} users, py-spy attached)", r)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=30, help="seconds per load phase")
    parser.add_argument("--users", default="32,128", help="user counts of the load phases")
    parser.add_argument("--soak-calls", type=int, default=10_000, help="invokes of the soak (0: no soak)")
    parser.add_argument("--session-soak", type=int, default=0, metavar="N",
                        help="open N gateway sessions one after another, open fds sampled (0: none)")
    parser.add_argument("--fault-users", type=int, default=32)
    parser.add_argument("--fault-gap", type=int, default=20, help="seconds between faults")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("--faults", default="web,redis,pg,mcp,runner",
                        help="which faults, in order (web,redis,pg,mcp,runner)")
    parser.add_argument("--members", type=int, default=8,
                        help="members of the company the virtual users act as, each with an API token of their own")
    parser.add_argument("--profile", type=int, default=0, metavar="SECONDS",
                        help="py-spy record a web worker and a runner for SECONDS of a 32-user run (0: no profile)")
    parser.add_argument("--cf-users", type=int, default=32, help="users of the ContextForge comparison")
    parser.add_argument("--cf-rounds", type=int, default=2,
                        help="alternating rounds (Toolhub, ContextForge) of the comparison, --duration seconds each")
    parser.add_argument("--contextforge", choices=("auto", "no"), default="auto",
                        help="auto: the same workload against ContextForge where it installs, ratios printed")
    quotas.add_arguments(parser)
    args = parser.parse_args()
    EXTRA_ENV.update(quotas.topology_env(args))
    began = time.monotonic()
    locust_bin = ensure_locust()
    user_counts = [int(u) for u in args.users.split(",") if u.strip()]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 CPUs shared)")
    model_port = free_port()
    model = subprocess.Popen([sys.executable, str(demo_model_script()), "--port", str(model_port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report: dict[str, object] = {}
    try:
        with topology() as (hosts, token):
            tool_id, agent_id, tool_name = setup(hosts[0], token, f"http://127.0.0.1:{model_port}/v1")
            tokens = create_members(hosts, args.members) if args.members > 0 else [token]
            print(f"virtual users act as {len(tokens)} members of tenant prod, each with an API token of their own "
                  f"(REST and gateway); {RUNNERS} LOCAL server runners", flush=True)
            call_log = OUT / "calls.txt"
            OUT.mkdir(parents=True, exist_ok=True)
            call_log.write_text("")
            env = {**os.environ, "LOAD_HOSTS": ",".join(hosts), "LOAD_TOKENS": ",".join(tokens), "LOAD_TENANT": "prod",
                   "LOAD_TOOL_ID": str(tool_id), "LOAD_AGENT_ID": str(agent_id), "LOAD_TOOL_NAME": tool_name,
                   "LOAD_CALL_LOG": str(call_log)}
            for users in user_counts:
                phase = locust(locust_bin, env, users, args.duration, f"u{users}")
                meter = cpu_meter(phase.pid)
                phase.wait()
                cpu = meter.stop()
                report[f"u{users}"] = r = read_stats(f"u{users}")
                r["cpu"] = cpu
                print_stats(f"{users:>4} users (Toolhub, 2 web processes x {os.environ.get('WEB_CONCURRENCY', '2')} "
                            f"workers)", r)
                print_cpu(cpu, r["requests"])
            if args.quotas:  # before the faults, which restart the Redis the quota counters live in
                report["quotas"] = quotas.phase(sys.modules[__name__], locust_bin, env, args)
            if args.profile:
                report["profile"] = profile(locust_bin, env, 32, args.profile)
            if args.soak_calls:
                report["soak"] = soak(locust_bin, env, call_log, args.soak_calls, 32)
            if args.session_soak:
                report["session_soak"] = session_soak.session_soak(env, args.session_soak, fd_kinds)
            if not args.skip_faults:
                report["faults"] = run_faults(locust_bin, env, call_log, args.fault_users, args.fault_gap,
                                              [f.strip() for f in args.faults.split(",") if f.strip()])
                locust(locust_bin, env, 8, 10, "recovery").wait()
                rec = read_stats("recovery")
                print_stats("after the faults, 8 users for 10 s (goal: 0 errors, recovered by itself)", rec)
                report["recovery_error_rate"] = rec["error_rate"]
            if args.contextforge != "no":
                report["contextforge"] = compare_contextforge(locust_bin, env, hosts, token, args.cf_users,
                                                              args.duration, args.cf_rounds)
            missing = audit_rows_missing(call_log)
            print(f"completed invokes in the whole run: {count_calls(call_log)}; audit rows missing: {missing} (goal 0)")
            report["audit_missing"] = missing
    finally:
        model.terminate()
        model.wait(10)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"wall time {time.monotonic() - began:.0f}s")
    (OUT / "report.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
