"""Tenants app config."""

from django.apps import AppConfig


class TenantsAppConfig(AppConfig):
    name = "tenants_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Tenants"

    def ready(self) -> None:
        from tenants_app import auth_cache

        auth_cache.connect()
