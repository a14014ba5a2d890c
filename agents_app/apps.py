"""Agents app config: connects the metrics and the snapshot invalidation signals."""

from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Agents"

    def ready(self) -> None:
        from agents_app import metrics

        metrics.connect()
        from agents_app import signals

        signals.connect()
