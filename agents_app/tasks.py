"""Celery tasks of the agents app: thin, id-based, idempotent."""

from __future__ import annotations

from celery import shared_task

# Celery's autodiscovery imports this module only: the intent tree's task is registered through it.
from agents_app.intents.tasks import embed_intent_examples

__all__ = ["embed_intent_examples", "prune_oauth_clients"]


@shared_task(name="agents.prune_oauth_clients")
def prune_oauth_clients() -> int:
    """Remove dynamically registered OAuth clients that never got a member's grant (agents_app.gateway.oauth)."""
    from agents_app.gateway.oauth.housekeeping import oauth_clients_prune

    return oauth_clients_prune()
