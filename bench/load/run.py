"""Load and fault suite against the two-web-process production topology (deploy/prod_local.py).

    make bench-load            # or: .venv/bin/python bench/load/run.py [--duration 30] [--skip-faults]

Needs PostgreSQL and Redis on 127.0.0.1 (the fault phase restarts both, so run it on a machine of your own).
Prints, for 32 and 128 users of a mixed workload (list tools, invoke a warm MCP tool, chat with the fake
model): throughput, p50/p95/p99, error rate; RSS and open fds of the web processes over ~10,000 calls; MCP
server processes before and after; then, under load, kills a web worker, restarts Redis, restarts PostgreSQL
and kills the MCP server, and reports errors per fault, recovery, and whether every completed call kept its
audit row.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import free_port, prod_topology  # type: ignore[import-not-found]  # noqa: E402

BENCH_VENV = ROOT / "var" / "bench-venv"
OUT = ROOT / "var" / "bench-load"
PG_VERSION = next(iter(sorted(os.listdir("/etc/postgresql"))), "15") if os.path.isdir("/etc/postgresql") else "15"
DB = "toolhub_load"




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
    env = {"TOOLHUB_THROTTLE_INVOKE": "1000000/min", "TOOLHUB_THROTTLE_CHAT": "1000000/min",
           "WEB_CONCURRENCY": os.environ.get("WEB_CONCURRENCY", "2"), "LOG_LEVEL": "WARNING"}
    with prod_topology(db=DB, redis_db=12, env=env) as (hosts, token):
        yield hosts, token


def demo_model_script() -> Path:
    for candidate in (ROOT / "toolhub_demo" / "demo_model.py", ROOT / "tests" / "fixtures" / "fake_llm.py"):
        if candidate.exists():
            return candidate
    raise SystemExit("no demo model script found")


def setup(base: str, token: str, model_url: str) -> tuple[int, int]:
    import httpx2

    c = httpx2.Client(base_url=base, headers={"Authorization": f"Token {token}", "X-Tenant": "prod"}, timeout=60)
    suffix = str(int(time.time()))
    tool = c.post("/api/v1/tools/", json={"name": f"load-inventory-{suffix}", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(ROOT / "toolhub_demo" / "inventory_server.py")],
        "startup_timeout_s": 60}}).json()
    assert c.post(f"/api/v1/tools/{tool['id']}/refresh/").status_code == 200
    model = c.post("/api/v1/models/", json={"name": f"load-model-{suffix}", "base_url": model_url,
                                            "model": "demo", "api_key": "load-key"}).json()
    agent = c.post("/api/v1/agents/", json={"name": f"load-agent-{suffix}", "model": model["id"], "max_steps": 4,
                                            "system_prompt": "Answer stock questions.",
                                            "tools": [{"tool": tool["id"], "allowed_functions": None,
                                                       "requires_approval": False}]}).json()
    assert "id" in agent, agent
    return int(tool["id"]), int(agent["id"])


def web_pids() -> list[int]:
    """gunicorn processes (masters and workers) of this topology: not another prod_local's on the machine
    (a bench or a test run of someone else), which would count in the soak's RSS and fds."""
    marker = f"TOOLHUB_PROD_LOCAL_DB={DB}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
                if b"gunicorn" not in cmd or b"deploy/gunicorn.conf.py" not in cmd:
                    continue
                if marker not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    continue
            except OSError:
                continue
            pids.append(int(entry))
    return pids


def worker_pids() -> list[int]:
    masters = set()
    pids = web_pids()
    for pid in pids:
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        if ppid in pids:
            masters.add(pid)
    return sorted(masters)


def mcp_servers() -> list[int]:
    """Inventory servers started by this topology's web workers."""
    web = set(web_pids())
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"inventory_server.py" in cmd and ppid in web:
                found.append(int(entry))
    return found


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


def locust(locust_bin: Path, env: dict[str, str], users: int, seconds: int, tag: str) -> subprocess.Popen[bytes]:
    OUT.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [str(locust_bin), "-f", str(Path(__file__).parent / "locustfile.py"), "--headless", "-u", str(users),
         "-r", str(users), "-t", f"{seconds}s", "--csv", str(OUT / tag), "--only-summary", "--stop-timeout", "10"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(OUT / f"{tag}.log", "wb"))  # noqa: SIM115


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
    import psycopg

    ids = [int(x) for x in log.read_text().split()]
    if not ids:
        return 0
    with psycopg.connect(f"postgres://postgres@127.0.0.1:5432/{DB}") as conn:
        found = conn.execute("SELECT count(*) FROM tools_app_toolcall WHERE id = ANY(%s)", (ids,)).fetchone()
    return len(set(ids)) - int(found[0] if found else 0)


def restart_redis() -> None:
    subprocess.run(["redis-cli", "-h", "127.0.0.1", "shutdown", "nosave"], capture_output=True)
    time.sleep(1)
    subprocess.run(["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379", "--save",
                    "", "--appendonly", "no", "--dir", "/var/lib/redis"], check=True, capture_output=True)


def restart_postgres() -> None:
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", PG_VERSION, "main", "restart"], check=True,
                   capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=30, help="seconds per load phase")
    parser.add_argument("--soak-calls", type=int, default=10_000)
    parser.add_argument("--skip-faults", action="store_true")
    args = parser.parse_args()
    locust_bin = ensure_locust()
    model_port = free_port()
    model = subprocess.Popen([sys.executable, str(demo_model_script()), "--port", str(model_port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with topology() as (hosts, token):
            tool_id, agent_id = setup(hosts[0], token, f"http://127.0.0.1:{model_port}/v1")
            call_log = OUT / "calls.txt"
            OUT.mkdir(parents=True, exist_ok=True)
            call_log.write_text("")
            env = {**os.environ, "LOAD_HOSTS": ",".join(hosts), "LOAD_TOKEN": token, "LOAD_TENANT": "prod",
                   "LOAD_TOOL_ID": str(tool_id), "LOAD_AGENT_ID": str(agent_id), "LOAD_CALL_LOG": str(call_log)}
            servers_before = len(mcp_servers())
            results = {}
            for users in (32, 128):
                locust(locust_bin, env, users, args.duration, f"u{users}").wait()
                results[users] = read_stats(f"u{users}")
                r = results[users]
                print(f"{users:>4} users: {r['rps']:.0f} req/s  p50 {r['p50']:.0f} ms  p95 {r['p95']:.0f} ms  "
                      f"p99 {r['p99']:.0f} ms  errors {r['error_rate']:.2%}  ({r['requests']:.0f} requests)")
            # Soak: footprint after warm-up vs after --soak-calls more invokes.
            rss0, fds0 = footprint()
            start_calls = count_calls(call_log)
            soak = locust(locust_bin, env, 32, 3600, "soak")
            deadline = time.monotonic() + 900
            while count_calls(call_log) - start_calls < args.soak_calls and time.monotonic() < deadline:
                time.sleep(1)
            soak.send_signal(signal.SIGINT)
            soak.wait(60)
            rss1, fds1 = footprint()
            done = count_calls(call_log) - start_calls
            print(f"soak over {done} invokes: web RSS {rss0 / 1024:.0f} -> {rss1 / 1024:.0f} MiB "
                  f"({(rss1 - rss0) / max(rss0, 1):+.1%}), open fds {fds0} -> {fds1} ({(fds1 - fds0) / max(fds0, 1):+.1%}); "
                  f"goal: within 10%")
            workers = len(worker_pids())
            print(f"MCP server processes: {servers_before} before load, {len(mcp_servers())} after "
                  f"(goal: at most one warm session per web worker = {workers}; none leaked)")
            if not args.skip_faults:
                run_faults(locust_bin, env, call_log, args.duration)
            missing = audit_rows_missing(call_log)
            print(f"completed invokes: {count_calls(call_log)}; audit rows missing: {missing} (goal 0)")
    finally:
        model.terminate()
        model.wait(10)


def run_faults(locust_bin: Path, env: dict[str, str], call_log: Path, duration: int) -> None:
    total = max(duration, 50)
    proc = locust(locust_bin, env, 32, total, "faults")
    faults = [
        ("kill a web worker", lambda: os.kill(worker_pids()[0], signal.SIGKILL)),
        ("restart Redis", restart_redis),
        ("restart PostgreSQL", restart_postgres),
        ("kill the MCP server", lambda: [os.kill(p, signal.SIGKILL) for p in mcp_servers()]),
    ]
    step = total / (len(faults) + 1)
    for i, (name, action) in enumerate(faults, 1):
        time.sleep(step if i == 1 else step)
        action()
        print(f"  fault at ~{step * i:.0f}s: {name}")
    proc.wait()
    r = read_stats("faults")
    print(f"under faults: {r['rps']:.0f} req/s, errors {r['error_rate']:.2%} of {r['requests']:.0f} requests "
          f"(failures by cause in {OUT / 'faults_failures.csv'})")
    # Recovery: a short clean run after the faults must be error-free.
    locust(locust_bin, env, 8, 10, "recovery").wait()
    rec = read_stats("recovery")
    print(f"after faults: {rec['rps']:.0f} req/s, errors {rec['error_rate']:.2%} (goal 0: recovered by itself)")
    print(json.dumps({"faults_error_rate": round(r["error_rate"], 4), "recovery_error_rate": rec["error_rate"]}))


if __name__ == "__main__":
    main()
