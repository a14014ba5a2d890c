"""Agents app config: registers the demo seeder."""

from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Agents"

    def ready(self) -> None:
        from agents_app import metrics

        metrics.connect()
        from agents_app.demo import seed_agents
        from tenants_app.demo import demo_seeders

        if seed_agents not in demo_seeders:
            demo_seeders.append(seed_agents)
