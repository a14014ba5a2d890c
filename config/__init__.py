"""Project configuration; importing it loads the Celery app so @shared_task binds to it, and starts
OpenTelemetry tracing when the environment names an OTLP endpoint (every process imports this first)."""

from config.celery import app as celery_app
from core import tracing

tracing.configure()

__all__ = ["celery_app"]
