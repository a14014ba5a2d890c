"""Reads of company sign-in: providers, SCIM tokens, provisioned users and groups, each scoped to its tenant."""

from __future__ import annotations

import hashlib
from typing import Any

from django.db.models import QuerySet

from core.errors import NotFound
from identity_app.models import IdentityProvider, ScimGroup, ScimToken, ScimUser
from tenants_app.models import Membership, Tenant


def provider_list(*, tenant: Tenant) -> QuerySet[IdentityProvider]:
    return IdentityProvider.objects.filter(tenant=tenant).order_by("name")


def provider_get(*, tenant: Tenant, provider_id: Any) -> IdentityProvider:
    try:
        return IdentityProvider.objects.get(tenant=tenant, pk=int(provider_id))
    except (IdentityProvider.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound() from None


def provider_for_signin(*, provider_id: Any) -> IdentityProvider | None:
    """A provider by id for the sign-in pages, which come before any tenant is known (the tenant is the provider's)."""
    try:
        return IdentityProvider.objects.select_related("tenant").filter(pk=int(provider_id),
                                                                         tenant__is_active=True).first()
    except (ValueError, TypeError, OverflowError):
        return None


def email_domain(email: str) -> str:
    return email.rpartition("@")[2].strip().lower() if "@" in (email or "") else ""


def provider_for_email(*, email: str) -> IdentityProvider | None:
    """The provider whose email_domains hold this address's domain (a domain belongs to one provider)."""
    domain = email_domain(email)
    if not domain:
        return None
    for provider in IdentityProvider.objects.select_related("tenant").filter(tenant__is_active=True):
        if domain in provider.email_domains:
            return provider
    return None


def providers_for_login() -> list[IdentityProvider]:
    """Every active tenant's providers, for the links on /accounts/login/."""
    return list(IdentityProvider.objects.select_related("tenant").filter(tenant__is_active=True)
                .order_by("name", "tenant__slug"))


def enforcing_provider_for(*, user: Any) -> IdentityProvider | None:
    """The provider that requires company sign-in of this user: an enforced provider of a tenant they are a member
    of, whose domains hold their email (a tenant's setting never reaches people outside it)."""
    provider = provider_for_email(email=getattr(user, "email", "") or "")
    if provider is None or not provider.enforced:
        return None
    return provider if Membership.objects.filter(tenant=provider.tenant, user=user).exists() else None


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def scim_token_list(*, tenant: Tenant) -> QuerySet[ScimToken]:
    return ScimToken.objects.filter(tenant=tenant).order_by("-created_at")


def scim_token_lookup(*, token: str) -> ScimToken | None:
    """The token row a bearer token names (by its hash), with its tenant; None for an unknown token."""
    if not token:
        return None
    return ScimToken.objects.select_related("tenant").filter(token_hash=token_hash(token),
                                                             tenant__is_active=True).first()


def scim_user_list(*, tenant: Tenant) -> QuerySet[ScimUser]:
    return ScimUser.objects.filter(tenant=tenant).select_related("user").order_by("pk")


def scim_user_get(*, tenant: Tenant, scim_id: Any) -> ScimUser:
    try:
        return ScimUser.objects.select_related("user").get(tenant=tenant, pk=int(scim_id))
    except (ScimUser.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound() from None


def scim_group_list(*, tenant: Tenant) -> QuerySet[ScimGroup]:
    return ScimGroup.objects.filter(tenant=tenant).prefetch_related("members__user").order_by("pk")


def scim_group_get(*, tenant: Tenant, scim_id: Any) -> ScimGroup:
    try:
        return ScimGroup.objects.prefetch_related("members__user").get(tenant=tenant, pk=int(scim_id))
    except (ScimGroup.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound() from None
