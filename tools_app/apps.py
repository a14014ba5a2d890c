"""Tools app config: wires signals and the pool's config-change listener."""

from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Tools"

    def ready(self) -> None:
        from tools_app import metrics

        metrics.connect()
        from tools_app import adapters, signals  # noqa: F401
        from tools_app.services.tools import config_change_listeners

        if adapters.release_tool not in config_change_listeners:
            config_change_listeners.append(adapters.release_tool)

        from tenants_app.demo import demo_seeders
        from tools_app.demo import seed_tools

        if seed_tools not in demo_seeders:
            demo_seeders.append(seed_tools)
