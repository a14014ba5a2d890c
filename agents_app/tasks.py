"""Celery tasks of the agents app: thin, id-based, idempotent."""

from __future__ import annotations

from celery import shared_task

from tenants_app.models import Tenant


@shared_task(name="agents.embed_intent_examples")
def embed_intent_examples(tenant_id: int, node_id: int | None = None) -> int:
    """Store sentence embeddings of a node's (or the whole tree's) examples that lack one."""
    from agents_app.services.intents import intent_examples_embed

    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return 0
    return intent_examples_embed(tenant=tenant, node_id=node_id)


@shared_task(name="agents.prune_oauth_clients")
def prune_oauth_clients() -> int:
    """Remove dynamically registered OAuth clients that never got a member's grant (agents_app.gateway.oauth)."""
    from agents_app.gateway.oauth.housekeeping import oauth_clients_prune

    return oauth_clients_prune()
