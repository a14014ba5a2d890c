"""Grants follow what they rest on: revoking an access token (or its refresh token, which deletes it) or changing
or removing a client drops remembered gateway principals (the identity generation); an agent or a membership
going away revokes the OAuth tokens bound to it."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save, pre_delete
from oauth2_provider.models import get_access_token_model, get_application_model

from agents_app.gateway.oauth.authorizations import authorizations_revoke_bound
from agents_app.models import Agent
from tenants_app.auth_cache import bump_generation
from tenants_app.models import Membership, Tenant


def _agent_going(sender: Any, instance: Agent, **kwargs: Any) -> None:
    tenant = Tenant.objects.filter(pk=instance.tenant_id).first()
    if tenant is not None:
        authorizations_revoke_bound(tenant=tenant, agent_id=instance.pk)


def _membership_going(sender: Any, instance: Membership, **kwargs: Any) -> None:
    tenant = Tenant.objects.filter(pk=instance.tenant_id).first()
    if tenant is not None:
        authorizations_revoke_bound(tenant=tenant, user_id=instance.user_id)


def connect() -> None:
    post_delete.connect(bump_generation, sender=get_access_token_model(), dispatch_uid="gateway-oauth-token-delete")
    for signal, name in ((post_save, "save"), (post_delete, "delete")):
        signal.connect(bump_generation, sender=get_application_model(), dispatch_uid=f"gateway-oauth-app-{name}")
    pre_delete.connect(_agent_going, sender=Agent, dispatch_uid="gateway-oauth-agent-delete")
    pre_delete.connect(_membership_going, sender=Membership, dispatch_uid="gateway-oauth-membership-delete")
