"""Remembered gateway principals and identity lookups are dropped when a grant goes away: revoking an access
token (or its refresh token, which deletes it) or changing or removing a client bumps the identity generation."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save
from oauth2_provider.models import get_access_token_model, get_application_model

from tenants_app.auth_cache import bump_generation


def connect() -> None:
    post_delete.connect(bump_generation, sender=get_access_token_model(), dispatch_uid="gateway-oauth-token-delete")
    for signal, name in ((post_save, "save"), (post_delete, "delete")):
        signal.connect(bump_generation, sender=get_application_model(), dispatch_uid=f"gateway-oauth-app-{name}")
