"""`toolhub_run`: migrate, seed the demo, then serve web + an embedded Celery worker with beat."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from toolhub_demo.seed import seed_demo
from tools_app.runtime.procenv import kill_process_group

DEMO_MODEL_PORT = 8765  # the demo model's own default (python -m toolhub_demo.demo_model)


def _free(port: int) -> int | None:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return None
        return int(sock.getsockname()[1])


def demo_model_port(remembered: Path, default: int = DEMO_MODEL_PORT) -> int:
    """The demo model's port, the same at every start so a ChatModel an operator pointed at it keeps working:
    the remembered one (first chosen: `default`, else a free one). When something else holds it, this run takes
    a free port but the remembered one stays, so the next start goes back to it."""
    try:
        last = int(remembered.read_text().strip())
    except (OSError, ValueError):
        last = 0
    if 0 < last < 65536:
        port = _free(last)
        if port is not None:
            return port
        port = _free(0)
        if port is None:
            raise RuntimeError("no free port for the demo model")
        return port
    port = _free(default) or _free(0)
    if port is None:
        raise RuntimeError("no free port for the demo model")
    remembered.parent.mkdir(parents=True, exist_ok=True)
    remembered.write_text(f"{port}\n")
    return port


class Command(BaseCommand):
    help = "Run Toolhub on embedded defaults (SQLite, filesystem broker, worker and beat in one child)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--no-worker", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        demo_model = self._start_demo_model()
        login = seed_demo()
        url = f"http://{opts['host']}:{opts['port']}"
        banner = [
            "",
            "Toolhub is running.",
            f"  API:       {url}/api/v1/  (docs: {url}/api/v1/docs/)",
            f"  MCP:       {url}/mcp/<tenant>/agents/<agent id>/   (Authorization: Bearer <API token>; "
            "client configs on each agent's admin page)",
            *login.lines,
        ]
        worker = None
        ready_file = settings.VAR_DIR / f"worker-ready.{os.getpid()}"
        ready_file.unlink(missing_ok=True)
        if not opts["no_worker"]:
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "--beat", "--pool=solo",
                 "--loglevel=WARNING", "-s", str(settings.VAR_DIR / "celery-beat-schedule")],
                start_new_session=True, env={**os.environ, "TOOLHUB_WORKER_READY_FILE": str(ready_file)},
            )
            banner.append(f"  Worker:    embedded Celery worker + beat (pid {worker.pid}, broker {settings.CELERY_BROKER_URL.split('@')[-1]})")
        if demo_model is not None:
            banner.append(f"  Chat:      {url}/playground/   demo model at {settings.TOOLHUB_DEMO_MODEL_URL} "
                          f"(pid {demo_model.pid}): a few fixed rules, NOT an AI; add a ChatModel for real answers")
        # The login comes last, after the worker's and the web server's start-up output, so it is what
        # stays on screen.
        banner += [
            f"  Admin:     {url}/admin/   login {login.username} / {login.password}",
            f"  API token: {login.token}   (header: Authorization: Token <key>; X-Tenant: demo, optional "
            "for a user of one tenant)",
            "",
        ]
        server = uvicorn.Server(uvicorn.Config("config.asgi:application", host=opts["host"], port=int(opts["port"]),
                                               lifespan="on", log_level="info"))
        threading.Thread(target=self._announce, args=(server, worker, ready_file, banner), daemon=True).start()
        # SIGTERM (e.g. from a process manager) must unwind through `finally` so children stop too.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            # Uvicorn on config.asgi: Django, streaming chat and the MCP gateway (/mcp/...) in one server.
            server.run()
        finally:
            ready_file.unlink(missing_ok=True)
            # A second Ctrl-C or SIGTERM must not cut the cleanup short and orphan the children.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for child in (demo_model, worker):
                if child is not None:
                    # Each child leads its own process group: SIGTERM, wait, then SIGKILL whatever is left.
                    kill_process_group(child.pid, term_wait_s=10)
                    child.wait(timeout=5)

    def _announce(self, server: uvicorn.Server, worker: subprocess.Popen[bytes] | None, ready_file: Path,
                  banner: list[str]) -> None:
        """Print the banner once the web server listens and the worker said it is ready (or 60 s passed)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            worker_done = worker is None or ready_file.exists() or worker.poll() is not None
            if server.started and worker_done:
                break
            time.sleep(0.2)
        self.stdout.write("\n".join(banner))
        self.stdout.flush()

    def _start_demo_model(self) -> subprocess.Popen[bytes] | None:
        """Without TOOLHUB_DEMO_MODEL_URL, run the rule-based demo model so agents without a model can chat."""
        if settings.TOOLHUB_DEMO_MODEL_URL:
            return None
        port = demo_model_port(Path(settings.VAR_DIR) / "demo-model.port")
        proc = subprocess.Popen([sys.executable, "-m", "toolhub_demo.demo_model", "--port", str(port)],
                                stdout=subprocess.DEVNULL, start_new_session=True, cwd=str(settings.BASE_DIR))
        url = f"http://127.0.0.1:{port}/v1"
        settings.TOOLHUB_DEMO_MODEL_URL = url
        os.environ["TOOLHUB_DEMO_MODEL_URL"] = url  # the worker child inherits it
        return proc
