"""A tool's package link removed (the tool deleted, or no longer a package runner): free versions nobody uses."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from tools_app.packages.models import ToolPackage


@receiver(post_delete, sender=ToolPackage)
def _link_removed(sender: Any, instance: ToolPackage, **kwargs: Any) -> None:
    from tools_app.packages.services import free_unused

    ids = [pk for pk in (instance.current_id, instance.target_id) if pk]
    if ids:
        transaction.on_commit(lambda: free_unused(ids))
