"""Agents app config."""

from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Agents"
