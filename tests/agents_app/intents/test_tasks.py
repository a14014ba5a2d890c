"""The embedding task: thin, idempotent, and a round trip through a real worker in CI."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from agents_app import tasks
from agents_app.models import IntentExample, IntentNode
from agents_app.runtime.intents import EMBEDDING_MODEL
from tests.waiting import PROCESS_BOUND_S


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_embed_task_stores_missing_vectors_once(tenant: Any) -> None:
    """Eager without a broker; in CI a real worker process reads the committed rows and stores the vectors."""
    node = IntentNode.objects.create(tenant=tenant, code="weather", name="Weather")
    for i, text in enumerate(["will it rain tomorrow", "北京今天天气怎么样"]):
        IntentExample.objects.create(node=node, text=text, position=i)
    assert tasks.embed_intent_examples.delay(tenant.pk, node.pk).get(timeout=PROCESS_BOUND_S) == 2
    rows = list(IntentExample.objects.filter(node=node))
    assert all(r.embedding and r.embedding_model == EMBEDDING_MODEL for r in rows)
    assert tasks.embed_intent_examples.delay(tenant.pk, node.pk).get(timeout=PROCESS_BOUND_S) == 0  # idempotent
    assert tasks.embed_intent_examples(999_999) == 0  # a vanished tenant is a no-op
    if settings.TOOLHUB_TEST_CELERY_WORKER:
        assert not settings.CELERY_TASK_ALWAYS_EAGER
