"""`rotate_secrets`: re-encrypt every encrypted column under the newest key of TOOLHUB_SECRET_KEYS."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import transaction

from core import crypto
from core.fields import EncryptedJSONField


class Command(BaseCommand):
    help = "Re-encrypt all stored secrets with the newest key (keep old keys listed until this has run)."

    def handle(self, *args: Any, **opts: Any) -> None:
        crypto.reset_keys()
        total = 0
        for model in apps.get_models():
            fields = [f.name for f in model._meta.get_fields() if isinstance(f, EncryptedJSONField)]
            if not fields:
                continue
            with transaction.atomic():
                # Loading decrypts with any listed key; saving encrypts with the newest one.
                for obj in model._default_manager.select_for_update().only("pk", *fields).iterator():
                    model._default_manager.filter(pk=obj.pk).update(**{f: getattr(obj, f) for f in fields})
                    total += 1
            self.stdout.write(f"{model._meta.label}: re-encrypted {', '.join(fields)}")
        self.stdout.write(f"rotated {total} row(s)")
