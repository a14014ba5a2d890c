"""uvicorn's event loop and HTTP parser side by side: asyncio + h11 against uvloop + httptools.

    .venv/bin/python bench/uvicorn_loops.py [REQUESTS] [ROUNDS]

One uvicorn process on config.asgi (dev settings) per variant and round, REQUESTS kept-alive GETs of /healthz and
/api/v1/ from 16 client threads; prints the server process's CPU milliseconds per request (from /proc), the
variants alternated so the machine's load hits both alike (bench/load/PROFILE.md). Needs uvloop and httptools.
"""

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
PY = sys.executable
N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
PATHS = ["/healthz", "/api/v1/"]


def ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(port: int, count: int, timeout: float = 60) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        for i in range(count):
            conn.request("GET", PATHS[i % 2])
            conn.getresponse().read()
    finally:
        conn.close()


def run(loop: str, parser: str) -> tuple[float, float]:
    """(server CPU ms per request, wall seconds) of one variant."""
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.dev", "LOG_LEVEL": "WARNING"}
    log = open(f"{ROOT}/var/uvicorn-loops-{loop}.log", "ab")
    proc = subprocess.Popen([PY, "-m", "uvicorn", "config.asgi:application", "--port", str(port), "--loop", loop,
                             "--http", parser, "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(600):
            try:
                get(port, 1, timeout=5)
                break
            except OSError:
                time.sleep(0.2)
        get(port, 200)  # warm
        per_thread = N // 16
        before, started = ticks(proc.pid), time.time()
        threads = [threading.Thread(target=get, args=(port, per_thread)) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        cpu = (ticks(proc.pid) - before) / os.sysconf("SC_CLK_TCK")
        return cpu * 1000 / (per_thread * 16), time.time() - started
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def main() -> None:
    for round_ in range(ROUNDS):
        for loop, parser in (("asyncio", "h11"), ("uvloop", "httptools")):
            ms, wall = run(loop, parser)
            print(f"round {round_ + 1} {loop}+{parser}: {ms:.2f} ms server CPU/request ({wall:.1f}s wall), "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
