"""Gunicorn for Toolhub's web processes: uvicorn workers on config.asgi (HTTP, streaming chat, the MCP gateway)."""

import os
from typing import Any

bind = os.environ.get("TOOLHUB_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# uvicorn on uvloop + httptools (config/workers.py): a missing one fails the start, it does not slow every request.
worker_class = "config.workers.UvicornWorker"
# Chat streams and gateway streams stay open; the model timeout bounds them, not the worker timeout.
timeout = int(os.environ.get("TOOLHUB_WORKER_TIMEOUT_S", "120"))
graceful_timeout = 30
keepalive = 5
# Workers are recycled now and then so a slow leak can never grow without bound.
max_requests = int(os.environ.get("TOOLHUB_MAX_REQUESTS", "20000"))
max_requests_jitter = 2000
accesslog = None  # Django's own JSON log lines carry the request id; an access log would duplicate them.
wsgi_app = "config.asgi:application"


def child_exit(server: object, worker: Any) -> None:
    # Prometheus multiprocess mode: a dead worker's live gauges must not be summed forever.
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
