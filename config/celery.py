"""The Celery app; broker and schedule come from Django settings (CELERY_* names)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("toolhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="toolhub.ping")
def ping() -> str:
    """Proves the broker, a worker and the result path work end to end."""
    return "pong"
