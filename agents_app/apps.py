"""Agents app config: connects the metrics, the snapshot invalidation signals and the intent routers' change signals."""

from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Agents"

    def ready(self) -> None:
        from agents_app import metrics, signals
        from agents_app.intents import routing

        metrics.connect()
        signals.connect()
        routing.connect()
