"""Market app config."""

from django.apps import AppConfig


class MarketAppConfig(AppConfig):
    name = "market_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Market"
