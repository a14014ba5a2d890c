"""Market app config: connects the metrics."""

from django.apps import AppConfig


class MarketAppConfig(AppConfig):
    name = "market_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Market"

    def ready(self) -> None:
        from market_app import metrics

        metrics.connect()
        from market_app.admin import dashboard as admin_dashboard

        admin_dashboard.register()
