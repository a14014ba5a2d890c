"""Market app config: registers the demo seeder."""

from django.apps import AppConfig


class MarketAppConfig(AppConfig):
    name = "market_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Market"

    def ready(self) -> None:
        from market_app import metrics

        metrics.connect()
        from market_app.demo import seed_market
        from tenants_app.demo import demo_seeders

        if seed_market not in demo_seeders:
            demo_seeders.append(seed_market)
