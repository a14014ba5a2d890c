"""Tools app config."""

from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Tools"
