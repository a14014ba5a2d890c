"""`sync_builtin_tools`: one BUILTIN tool per tenant per registered tool, plugins re-read (idempotent)."""

from typing import Any

from django.core.management.base import BaseCommand

from tools_app.runtime import registry
from tools_app.services.builtins_sync import sync_all_tenants


class Command(BaseCommand):
    help = ("Add missing built-in and plugin tools to every tenant, refresh their definitions, and remove "
            "the rows of tools whose plugin package is gone (audit history stays).")

    def handle(self, *args: Any, **opts: Any) -> None:
        counts = sync_all_tenants(refresh=True)
        self.stdout.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
        for err in registry.plugin_errors():
            self.stderr.write(f"plugin not loaded: {err.entry_point} ({err.distribution}): {err.error}")
