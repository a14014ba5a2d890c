"""`toolhub_run`: migrate, seed the demo, then serve web + an embedded Celery worker with beat."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from tenants_app.demo import seed_demo


class Command(BaseCommand):
    help = "Run Toolhub on embedded defaults (SQLite, filesystem broker, worker and beat in one child)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--no-worker", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        login = seed_demo()
        url = f"http://{opts['host']}:{opts['port']}"
        banner = [
            "",
            "Toolhub is running.",
            f"  Admin:     {url}/admin/   login {login.username} / {login.password}",
            f"  API:       {url}/api/v1/  (docs: {url}/api/v1/docs/)",
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
        self.stdout.write("\n".join(banner))
        # SIGTERM (e.g. from a process manager) must unwind through `finally` so children stop too.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            call_command("runserver", f"{opts['host']}:{opts['port']}", use_reloader=False)
        finally:
            if worker is not None:
                try:
                    os.killpg(worker.pid, signal.SIGTERM)
                    worker.wait(timeout=10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(worker.pid, signal.SIGKILL)
