"""The demo app: seed, the `toolhub_run` runner, the demo model, demo catalog and inventory server."""

from django.apps import AppConfig


class ToolhubDemoConfig(AppConfig):
    name = "toolhub_demo"
    verbose_name = "Demo"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from toolhub_demo.records import register_demo_records

        register_demo_records()
