"""Signal wiring: the gateway's snapshots of an agent (principal, toolset) are dropped when it or its links change."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save

from agents_app.models import Agent, AgentTool
from core import hotcache


def _agent_changed(sender: Any, instance: Agent, **kwargs: Any) -> None:
    hotcache.bump_tenant(instance.tenant_id)


def _link_changed(sender: Any, instance: AgentTool, **kwargs: Any) -> None:
    field = AgentTool._meta.get_field("agent")
    tenant_id: int | None
    if field.is_cached(instance):
        tenant_id = instance.agent.tenant_id
    else:
        tenant_id = Agent.objects.filter(pk=instance.agent_id).values_list("tenant_id", flat=True).first()
    hotcache.bump_tenant(tenant_id)


def connect() -> None:
    for signal in (post_save, post_delete):
        signal.connect(_agent_changed, sender=Agent, dispatch_uid=f"hotcache-agent-{signal is post_save}")
        signal.connect(_link_changed, sender=AgentTool, dispatch_uid=f"hotcache-agenttool-{signal is post_save}")
