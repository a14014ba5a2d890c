"""Signal wiring: built-ins for new tenants and after migrate; pool release on config change."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_migrate, post_save
from django.dispatch import receiver

from tenants_app.models import Tenant


@receiver(post_save, sender=Tenant)
def _tenant_created(sender: Any, instance: Tenant, created: bool, **kwargs: Any) -> None:
    if created:
        from tools_app.services.builtins_sync import sync_builtin_tools

        # In the creating transaction: a tenant is never seen without its built-ins.
        sync_builtin_tools(tenant=instance)


def _after_migrate(sender: Any, **kwargs: Any) -> None:
    if getattr(sender, "name", "") != "tools_app":
        return
    from tools_app.services.builtins_sync import sync_all_tenants

    sync_all_tenants()


post_migrate.connect(_after_migrate)
