"""Shared helpers for the MCP benchmarks: percentiles, process and fd counts."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


async def read_body(receive: Any) -> bytes:
    """An ASGI request's whole body (the bench apps' control endpoints)."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def send_json(send: Any, payload: Any) -> None:
    """A 200 JSON answer over ASGI (the bench apps' control endpoints)."""
    import json

    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summary(samples_ms: list[float]) -> str:
    return (
        f"n={len(samples_ms)} p50={pct(samples_ms, 50):.2f} ms p95={pct(samples_ms, 95):.2f} ms "
        f"mean={statistics.fmean(samples_ms):.2f} ms"
    )


def warm_inventory_calls(pool: Any, spec: Any, n: int) -> list[float]:
    """Milliseconds of `n` warm get_inventory calls on `spec` through `pool` (one untimed call opens it first)."""
    assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def marked_processes(marker: str) -> int:
    """Live processes (any parent) whose environment carries BENCH_MARKER=<marker>."""
    needle = f"BENCH_MARKER={marker}".encode()
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if needle in Path(f"/proc/{entry}/environ").read_bytes():
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                count += state != "Z"
        except OSError:
            continue
    return count


def child_processes() -> int:
    me = str(os.getpid())
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            count += fields[1] == me
    return count


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scratch_toolhub(name: str) -> tuple[dict[str, str], str]:
    """A migrated SQLite Toolhub in var/<name> with tenant `bench` and its owner; returns (env, API token)."""
    import shutil
    import subprocess

    var = ROOT / "var" / name
    shutil.rmtree(var, ignore_errors=True)
    env = {**os.environ, "TOOLHUB_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "config.settings.dev",
           "DATABASE_URL": f"sqlite:///{var / 'db.sqlite3'}", "TOOLHUB_DISCOVER_ON_SAVE": "0",
           "TOOLHUB_THROTTLE_INVOKE": "1000000/min", "LOG_LEVEL": "WARNING"}
    env.pop("CELERY_BROKER_URL", None)
    manage = [sys.executable, "manage.py"]
    for args in (["migrate", "-v0"], ["create_tenant", "bench"], ["add_member", "bench", "bench", "--role", "owner"]):
        subprocess.run(manage + args, cwd=ROOT, env=env, check=True, capture_output=True)
    token = subprocess.run(manage + ["create_token", "bench"], cwd=ROOT, env=env, check=True, capture_output=True,
                           text=True).stdout.strip()
    return env, token


@contextmanager
def prod_topology(*, db: str, redis_db: int, env: dict[str, str] | None = None, runners: int = 1) -> Iterator[tuple[list[str], str]]:
    """deploy/prod_local.py --fresh (two gunicorn web processes, worker, beat on PostgreSQL + Redis);
    yields (the two base URLs, the operator's API token for tenant `prod`)."""
    import signal
    import subprocess

    a, b = free_port(), free_port()
    full = {**os.environ, **(env or {}), "TOOLHUB_PROD_LOCAL_DB": db, "TOOLHUB_PROD_LOCAL_REDIS_DB": str(redis_db)}
    proc = subprocess.Popen([sys.executable, "deploy/prod_local.py", "--fresh", "--ports", f"{a},{b}",
                             "--runners", str(runners)], cwd=ROOT,
                            env=full, stdout=subprocess.PIPE, text=True, start_new_session=True)
    token = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        if "Authorization: Token" in line:
            token = line.split("Token", 1)[1].split()[0]
            break
    try:
        if not token:
            raise SystemExit("prod_local did not start (are PostgreSQL and Redis up?)")
        yield [f"http://127.0.0.1:{a}", f"http://127.0.0.1:{b}"], token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(90)
