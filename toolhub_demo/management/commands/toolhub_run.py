"""`toolhub_run`: migrate, seed the demo, then serve web + an embedded Celery worker with beat."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from toolhub_demo.seed import seed_demo
from tools_app.runtime.procenv import kill_process_group


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
            f"  Admin:     {url}/admin/   login {login.username} / {login.password}",
            f"  API:       {url}/api/v1/  (docs: {url}/api/v1/docs/)",
            f"  MCP:       {url}/mcp/<tenant>/agents/<agent id>/   (Authorization: Bearer <API token>; "
            "client configs on each agent's admin page)",
            f"  API token: {login.token}   (header: Authorization: Token <key>; X-Tenant: demo)",
            *login.lines,
            "",
        ]
        worker = None
        if not opts["no_worker"]:
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "--beat", "--pool=solo",
                 "--loglevel=WARNING", "-s", str(settings.VAR_DIR / "celery-beat-schedule")],
                start_new_session=True,
            )
            banner.insert(-1, f"  Worker:    embedded Celery worker + beat (pid {worker.pid}, broker {settings.CELERY_BROKER_URL.split('@')[-1]})")
        if demo_model is not None:
            banner.insert(-1, f"  Chat:      {url}/playground/   demo model at {settings.TOOLHUB_DEMO_MODEL_URL} "
                              f"(pid {demo_model.pid}): a few fixed rules, NOT an AI; add a ChatModel for real answers")
        self.stdout.write("\n".join(banner))
        # SIGTERM (e.g. from a process manager) must unwind through `finally` so children stop too.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            # Uvicorn on config.asgi: Django, streaming chat and the MCP gateway (/mcp/...) in one server.
            uvicorn.run("config.asgi:application", host=opts["host"], port=int(opts["port"]), lifespan="on",
                        log_level="info")
        finally:
            # A second Ctrl-C or SIGTERM must not cut the cleanup short and orphan the children.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for child in (demo_model, worker):
                if child is not None:
                    # Each child leads its own process group: SIGTERM, wait, then SIGKILL whatever is left.
                    kill_process_group(child.pid, term_wait_s=10)
                    child.wait(timeout=5)

    def _start_demo_model(self) -> subprocess.Popen[bytes] | None:
        """Without TOOLHUB_DEMO_MODEL_URL, run the rule-based demo model so agents without a model can chat."""
        if settings.TOOLHUB_DEMO_MODEL_URL:
            return None
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "toolhub_demo.demo_model", "--port", str(port)],
                                stdout=subprocess.DEVNULL, start_new_session=True, cwd=str(settings.BASE_DIR))
        url = f"http://127.0.0.1:{port}/v1"
        settings.TOOLHUB_DEMO_MODEL_URL = url
        os.environ["TOOLHUB_DEMO_MODEL_URL"] = url  # the worker child inherits it
        return proc
