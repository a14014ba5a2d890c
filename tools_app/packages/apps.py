"""The package store app: its own models and migrations beside the tools app."""

from django.apps import AppConfig


class PackagesConfig(AppConfig):
    name = "tools_app.packages"
    label = "packages"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Packages"

    def ready(self) -> None:
        from tools_app.packages import signals  # noqa: F401
