"""Agents app config: connects the metrics, the snapshot invalidation signals, the intent routers' change signals
and the gateway's OAuth grant signals."""

from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Agents"

    def ready(self) -> None:
        from agents_app import metrics, signals
        from agents_app.gateway.oauth import signals as oauth_signals
        from agents_app.intents import routing

        metrics.connect()
        signals.connect()
        routing.connect()
        oauth_signals.connect()
