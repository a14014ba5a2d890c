"""The Celery app; broker and schedule come from Django settings (CELERY_* names)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("toolhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="toolhub.ping")
def ping() -> str:
    """Proves the broker, a worker and the result path work end to end."""
    return "pong"


@worker_init.connect
def _preload(**_: Any) -> None:
    """The pool's children are forked from this process: import here, once, what their tasks use (the MCP session
    pool with the SDK, the runners' client with redis), which `django.setup()` leaves to first use (issue 35)."""
    import tools_app.runtime.mcp.pool
    import tools_app.runtime.runner.client  # noqa: F401


@worker_ready.connect
def _announce_ready(**_: Any) -> None:
    """`make run` waits for this file before printing the login, so the login is the last thing shown."""
    marker = os.environ.get("TOOLHUB_WORKER_READY_FILE")
    if marker:
        Path(marker).touch()
