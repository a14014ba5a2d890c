"""Agents app config: connects the metrics."""

from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Agents"

    def ready(self) -> None:
        from agents_app import metrics

        metrics.connect()
