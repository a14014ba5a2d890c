"""The intent tree's Celery task: thin, id-based, idempotent (registered through agents_app.tasks)."""

from __future__ import annotations

from celery import shared_task

from agents_app.intents.embeddings import intent_examples_embed
from tenants_app.models import Tenant


@shared_task(name="agents.embed_intent_examples")
def embed_intent_examples(tenant_id: int, node_id: int | None = None) -> int:
    """Store sentence embeddings of a node's (or the whole tree's) examples that lack one."""
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return 0
    return intent_examples_embed(tenant=tenant, node_id=node_id)
