"""Signal wiring: built-ins for new tenants and after migrate; hot-path snapshots dropped on change. (The domain's
own event, `tool_released`, is tools_app.events.)"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_migrate, post_save
from django.dispatch import receiver

from core import hotcache
from tenants_app.models import Tenant
from tools_app.models import Tool, ToolFunction


@receiver(post_save, sender=Tenant)
def _tenant_created(sender: Any, instance: Tenant, created: bool, **kwargs: Any) -> None:
    if created:
        from tools_app.services.builtins_sync import sync_builtin_tools

        # In the creating transaction: a tenant is never seen without its built-ins.
        sync_builtin_tools(tenant=instance, new=True)
    else:
        from tools_app.services.local_policy import recycle_local_servers

        # Its sandbox policy (network, memory) may have changed: running LOCAL servers start again under it, and
        # hot-path snapshots holding the old tenant row are dropped.
        hotcache.bump_tenant(instance.pk)
        recycle_local_servers(tenant=instance)
        fields = kwargs.get("update_fields")
        if fields is None or "tool_screen" in fields:
            from tools_app.services.screening import rescreen_tenant

            # A new screen policy holds, flags or releases the functions already known, not only later ones.
            rescreen_tenant(tenant=instance)


def _after_migrate(sender: Any, **kwargs: Any) -> None:
    if getattr(sender, "name", "") != "tools_app":
        return
    from tools_app.services.builtins_sync import sync_all_tenants

    sync_all_tenants()


post_migrate.connect(_after_migrate)


def _tool_changed(sender: Any, instance: Tool, **kwargs: Any) -> None:
    hotcache.bump_tenant(instance.tenant_id)


def _function_changed(sender: Any, instance: ToolFunction, **kwargs: Any) -> None:
    field = ToolFunction._meta.get_field("tool")
    tenant_id: int | None
    if field.is_cached(instance):
        tenant_id = instance.tool.tenant_id
    else:
        tenant_id = Tool.objects.filter(pk=instance.tool_id).values_list("tenant_id", flat=True).first()
    hotcache.bump_tenant(tenant_id)


# Invoke and the gateway keep snapshots of tools and functions (core.hotcache): any change drops them.
for _signal in (post_save, post_delete):
    _signal.connect(_tool_changed, sender=Tool, dispatch_uid=f"hotcache-tool-{_signal is post_save}")
    _signal.connect(_function_changed, sender=ToolFunction, dispatch_uid=f"hotcache-function-{_signal is post_save}")
