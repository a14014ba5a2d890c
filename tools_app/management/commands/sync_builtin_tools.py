"""`sync_builtin_tools`: one BUILTIN tool per tenant per registered built-in (idempotent)."""

from typing import Any

from django.core.management.base import BaseCommand

from tools_app.services.builtins_sync import sync_all_tenants


class Command(BaseCommand):
    help = "Add missing built-in tools to every tenant, refresh their definitions, retire vanished ones."

    def handle(self, *args: Any, **opts: Any) -> None:
        counts = sync_all_tenants()
        self.stdout.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
