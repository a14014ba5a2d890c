"""The intent examples' sentence embeddings, stored once computed: the vectors the router matches questions by.

Scheduled after the tree's writes (agents_app.services.intents) and by a router build that found examples
without a vector of the current model (agents_app.intents.routing); run by agents_app.intents.tasks.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents_app.intents import selectors
from agents_app.models import IntentExample, IntentNode
from tenants_app.models import Tenant


def intent_examples_embed(*, tenant: Tenant, actor: Any = None, node_id: int | None = None) -> int:
    """Compute and store the vectors of examples that lack one (idempotent); returns how many were stored.

    The model runs outside any transaction; a vector is stored only if its example still has that text.
    """
    # numpy and the models on first use: the intent services import this module (their task), and so every Django
    # process's start would pay for numpy (issue 35), which only an embedding needs.
    from agents_app.runtime.intents.embedder import default_embedder, to_bytes

    embedder = default_embedder()
    todo = selectors.examples_to_embed(tenant=tenant, node_id=node_id, model=embedder.model)
    if not todo:
        return 0
    vectors = embedder.embed_examples([text for _, text in todo])
    stored = 0
    with transaction.atomic():
        touched: set[int] = set()
        for (example_id, text), vector in zip(todo, vectors, strict=True):
            row = IntentExample.objects.select_for_update().filter(pk=example_id, node__tenant=tenant, text=text).first()
            if row is None:
                continue
            row.embedding = to_bytes(vector)
            row.embedding_model = embedder.model
            row.save(update_fields=["embedding", "embedding_model"])
            touched.add(row.node_id)
            stored += 1
        # Routers cache per tree signature; a newer updated_at makes every process rebuild.
        IntentNode.objects.filter(tenant=tenant, pk__in=touched).update(updated_at=timezone.now())
    return stored
