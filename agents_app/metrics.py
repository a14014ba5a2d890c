"""Agent metrics: assistant turns are counted as their messages are stored."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save

from agents_app.models import Message
from core import metrics


def _observe_message(sender: Any, instance: Message, created: bool, **kwargs: Any) -> None:
    if created and instance.role == "assistant":
        conversation = instance.conversation
        metrics.CHAT_TURNS.labels(str(conversation.tenant_id), str(conversation.agent_id)).inc()


def connect() -> None:
    post_save.connect(_observe_message, sender=Message, dispatch_uid="toolhub-metrics-message")
