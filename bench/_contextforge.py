"""IBM ContextForge (mcp-contextforge-gateway 1.1.0, Python 3.12) on loopback with SQLite, for side-by-side benches.

Finds an installed copy (CONTEXTFORGE_BIN, /work/var-cf/cfvenv, var/contextforge) or installs one into
var/contextforge with python3.12 from PyPI; `None` with the reason when neither works, so a bench can skip it
and say why. Started with random strong secrets in a scratch directory, registers an MCP server (a
"gateway" in its words), bundles its tools into a virtual server and yields that server's /mcp URL and a
bearer token.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from _common import ROOT, free_port

VERSION = "1.1.0"
PACKAGE = f"mcp-contextforge-gateway=={VERSION}"
VENV = ROOT / "var" / "contextforge"


@dataclass
class ContextForge:
    base: str
    token: str
    server_url: str  # /servers/<id>/mcp: the virtual server's streamable-HTTP endpoint
    tool_name: str


def _python312() -> str | None:
    found = shutil.which("python3.12")
    if found and subprocess.run([found, "--version"], capture_output=True).returncode == 0:
        return found
    for candidate in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")), reverse=True):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def find_or_install(*, install: bool = True) -> tuple[Path | None, str]:
    """(the mcpgateway executable, how it was found) or (None, why not)."""
    candidates = [os.environ.get("CONTEXTFORGE_BIN", ""), "/work/var-cf/cfvenv/bin/mcpgateway",
                  str(VENV / "bin" / "mcpgateway")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate), f"found {candidate}"
    if not install:
        return None, "ContextForge is not installed (looked in CONTEXTFORGE_BIN, /work/var-cf/cfvenv, var/contextforge)"
    python = _python312()
    if python is None:
        return None, "ContextForge needs Python 3.12 and no python3.12 was found"
    print(f"installing {PACKAGE} into {VENV} with {python} (one time, a few minutes) ...", flush=True)
    shutil.rmtree(VENV, ignore_errors=True)
    steps = [[python, "-m", "venv", str(VENV)], [str(VENV / "bin" / "pip"), "install", "-q", PACKAGE]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return None, f"installing {PACKAGE} failed: {' | '.join(tail)}"
    return VENV / "bin" / "mcpgateway", f"installed into {VENV}"


def _wait(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 180) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"ContextForge exited with status {proc.returncode}")
        try:
            if httpx2.get(url, timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"ContextForge did not answer {url} within {timeout_s:.0f} s")


@contextmanager
def running(executable: Path, upstream_url: str, *, workers: int = 1) -> Iterator[ContextForge]:
    """ContextForge on a free loopback port with SQLite, the upstream registered and one virtual server;
    `workers` uvicorn worker processes (bench/load/run.py gives it as many as Toolhub's web workers)."""
    scratch = ROOT / "var" / "bench-contextforge"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    password = secrets.token_urlsafe(18) + "Aa1!"
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "OTEL_"))},
        "DATABASE_URL": f"sqlite:///{scratch / 'mcp.db'}",
        "JWT_SECRET_KEY": secrets.token_urlsafe(48), "AUTH_ENCRYPTION_SECRET": secrets.token_urlsafe(48),
        "PLATFORM_ADMIN_EMAIL": "admin@example.com", "PLATFORM_ADMIN_PASSWORD": password,
        "DEFAULT_USER_PASSWORD": secrets.token_urlsafe(18) + "Aa1!",
        "BASIC_AUTH_PASSWORD": secrets.token_urlsafe(18) + "Aa1!",
        "MCPGATEWAY_UI_ENABLED": "false", "MCPGATEWAY_ADMIN_API_ENABLED": "true",
        # The upstream is on loopback, which ContextForge refuses by default (as Toolhub's outbound guard does).
        "SSRF_ALLOW_LOCALHOST": "true", "CACHE_TYPE": "memory", "REDIS_URL": "", "LOG_LEVEL": "ERROR",
        # Its per-user limit (100 MCP requests a minute) would refuse the bench; Toolhub's bench lifts its
        # throttles the same way (TOOLHUB_THROTTLE_INVOKE).
        "RATE_LIMITING_ENABLED": "false", "TOOL_RATE_LIMIT": "1000000",
        "HOST": "127.0.0.1", "PORT": str(port),
    }
    log = open(scratch / "contextforge.log", "wb")
    extra = ["--workers", str(workers)] if workers > 1 else []
    proc = subprocess.Popen([str(executable), "--host", "127.0.0.1", "--port", str(port), *extra], cwd=scratch, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def stop() -> None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()

    try:
        cf = _register(base, password, upstream_url, proc)
    except Exception as exc:
        stop()
        tail = (scratch / "contextforge.log").read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{exc}\n--- contextforge.log (tail) ---\n{tail}") from exc
    try:
        yield cf
    finally:
        stop()


def _register(base: str, password: str, upstream_url: str, proc: subprocess.Popen[bytes]) -> ContextForge:
    _wait(f"{base}/health", proc)
    login = httpx2.post(f"{base}/auth/email/login", json={"email": "admin@example.com", "password": password},
                        timeout=60)
    login.raise_for_status()
    token = login.json()["access_token"]
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as api:
        registered = api.post("/gateways", json={"name": "inventory", "url": upstream_url,
                                                 "transport": "STREAMABLEHTTP"})
        if registered.status_code >= 300:
            raise RuntimeError(f"registering the MCP server failed: {registered.status_code} {registered.text[:300]}")
        tools = [t for t in api.get("/tools").json() if t.get("originalName") == "get_inventory"]
        if not tools:
            raise RuntimeError("ContextForge listed no get_inventory tool after registering the server")
        server = api.post("/servers", json={"server": {"name": "bench", "associated_tools": [tools[0]["id"]]}})
        if server.status_code >= 300:
            raise RuntimeError(f"creating the virtual server failed: {server.status_code} {server.text[:300]}")
        server_id = server.json()["id"]
    return ContextForge(base=base, token=token, server_url=f"{base}/servers/{server_id}/mcp",
                        tool_name=tools[0]["name"])


def describe(cf: ContextForge) -> str:
    return json.dumps({"contextforge": VERSION, "server_url": cf.server_url, "tool": cf.tool_name})
