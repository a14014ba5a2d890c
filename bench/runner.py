"""The runner tier side by side in one run: a warm invoke through a runner vs the in-process pool (p50 overhead),
and how many server processes W web workers x T LOCAL tools start (in-process: W x T; with a runner: T).

Needs Redis (REDIS_URL or redis://127.0.0.1:6379/12); starts one real `manage.py toolhub_runner`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid

from _common import (
    ROOT,
    marked_processes,
    pct,
    summary,
    warm_inventory_calls,
)

from core.outbound import OutboundPolicy
from tools_app.configs import server_spec
from tools_app.runtime.mcp import ServerSpec, SessionPool
from tools_app.runtime.runner.client import RunnerPool
from tools_app.runtime.runner.placement import Registry

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/12"
SECRET = "bench-runner-secret"
SERVER = ROOT / "toolhub_demo" / "inventory_server.py"


def spec(tool_id: int, marker: str) -> ServerSpec:
    config = {"command": sys.executable, "args": [str(SERVER)], "env": {"BENCH_MARKER": marker},
              "startup_timeout_s": 30}
    return server_spec(tool_id=tool_id, config_version=1, tenant_key="1", tool_type="LOCAL", config=config)


def start_runner() -> subprocess.Popen[bytes]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.dev", "TOOLHUB_RUNNERS": "redis",
           "REDIS_URL": REDIS_URL, "TOOLHUB_RUNNER_SECRET": SECRET}
    proc = subprocess.Popen([sys.executable, "manage.py", "toolhub_runner", "--port", str(port), "--id", "bench"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    registry = Registry(REDIS_URL, secret=SECRET)
    deadline = time.monotonic() + 60
    while "bench" not in {r.id for r in registry.runners(max_age_s=0)}:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("the runner did not start")
        time.sleep(0.2)
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--web", type=int, default=4, help="W: web workers")
    parser.add_argument("--tools", type=int, default=3, help="T: LOCAL tools")
    args = parser.parse_args()
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    runner = start_runner()
    policy = OutboundPolicy.build("")
    try:
        marker = uuid.uuid4().hex
        local = SessionPool(policy=policy)
        remote = RunnerPool(SessionPool(policy=policy), Registry(REDIS_URL, secret=SECRET), SECRET)
        through_runner, in_process = (warm_inventory_calls(remote, spec(1, marker), args.calls),
                                       warm_inventory_calls(local, spec(2, marker), args.calls))
        print(f"warm invoke via runner: {summary(through_runner)}")
        print(f"warm invoke in-process: {summary(in_process)}")
        print(f"p50 overhead of the runner hop: {pct(through_runner, 50) - pct(in_process, 50):+.2f} ms "
              f"({pct(through_runner, 50) / pct(in_process, 50):.2f}x)")
        local.shutdown()
        remote.shutdown()

        for label, make in (("in-process pools", lambda: SessionPool(policy=policy)),
                            ("runner", lambda: RunnerPool(SessionPool(policy=policy), Registry(REDIS_URL, secret=SECRET), SECRET))):
            marker = uuid.uuid4().hex
            workers = [make() for _ in range(args.web)]
            for worker in workers:
                for tool in range(args.tools):
                    assert worker.call(spec(100 + tool, marker), "get_inventory", {"sku": "DEMO-001"}).success
            print(f"server processes for W={args.web} web workers x T={args.tools} LOCAL tools, {label}: "
                  f"{marked_processes(marker)}")
            for worker in workers:
                worker.close_all()
                for tool in range(args.tools):
                    worker.close(100 + tool)
                worker.shutdown()
    finally:
        os.killpg(runner.pid, signal.SIGTERM)
        runner.wait(30)


if __name__ == "__main__":
    main()
