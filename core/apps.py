from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The shared rules (core/) as an app only for its management commands; it has no models."""

    name = "core"
    label = "toolhub_core"
    verbose_name = "Toolhub core"
