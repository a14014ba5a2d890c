"""Writes of company sign-in: providers, SCIM tokens, roles from groups, sign-in results and the leaver clean-up."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from core.codes import ApiCode
from core.errors import Conflict, DomainError, NotFound, PermissionDenied, ValidationFailed
from core.roles import ROLE_RANK, Role
from core.secrets import KEEP
from identity_app import selectors
from identity_app.models import (
    IdentityEvent,
    IdentityEventKind,
    IdentityLink,
    IdentityProvider,
    ScimToken,
    ScimUser,
)
from tenants_app import services as tenant_services
from tenants_app.models import Membership, Tenant
from tenants_app.permissions import ensure_role

DOMAIN_RE = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
ROLES = ", ".join(r.value for r in Role)


class SignInRefused(DomainError):
    """A company sign-in that cannot complete; the message is safe to show the person."""

    code = ApiCode.SIGNIN_REFUSED
    status = 403


# --- providers -----------------------------------------------------------------------------------------------


@dataclass
class ProviderInput:
    """Validated provider fields; KEEP (the default) leaves a field as it is."""

    name: Any = KEEP
    issuer: Any = KEEP
    client_id: Any = KEEP
    client_secret: Any = KEEP
    email_domains: Any = KEEP
    groups_claim: Any = KEEP
    role_map: Any = KEEP
    enforced: Any = KEEP


def clean_issuer(value: Any) -> str:
    issuer = str(value or "").strip()
    parts = urlsplit(issuer)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValidationFailed("issuer must be an http(s) URL without query or fragment, e.g. "
                               "https://login.example.com/realms/acme", details={"field": "issuer"})
    return issuer.rstrip("/")


def clean_domains(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationFailed("email_domains must be a list of domain names, e.g. [\"example.com\"]",
                               details={"field": "email_domains"})
    domains: list[str] = []
    for item in value:
        domain = item.strip().lower().lstrip("@")
        if not DOMAIN_RE.match(domain):
            raise ValidationFailed(f"email_domains: {item[:100]!r} is not a domain name (e.g. example.com)",
                                   details={"field": "email_domains", "value": item[:100]})
        if domain not in domains:
            domains.append(domain)
    return domains


def clean_role_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValidationFailed(f"role_map must be an object of group -> role ({ROLES})", details={"field": "role_map"})
    cleaned: dict[str, str] = {}
    for group, role in value.items():
        if not isinstance(group, str) or not group.strip() or len(group) > 255:
            raise ValidationFailed("role_map keys are group names (1-255 characters)", details={"field": "role_map"})
        if role not in Role.values:
            raise ValidationFailed(f"role_map[{group[:100]!r}]: {str(role)[:32]!r} is not a role; accepted: {ROLES}",
                                   details={"field": "role_map", "group": group[:100]})
        cleaned[group] = str(role)
    return cleaned


def _claimed_elsewhere(domains: Iterable[str], *, provider_id: int | None) -> list[str]:
    taken: list[str] = []
    others = IdentityProvider.objects.all() if provider_id is None else IdentityProvider.objects.exclude(pk=provider_id)
    for other in others.only("email_domains"):
        taken += [d for d in domains if d in other.email_domains]
    return sorted(set(taken))


def _apply(provider: IdentityProvider, data: ProviderInput) -> None:
    for field in ("name", "issuer", "client_id", "email_domains", "groups_claim", "role_map", "enforced"):
        value = getattr(data, field)
        if value is KEEP:
            continue
        if field == "issuer":
            value = clean_issuer(value)
        elif field == "email_domains":
            value = clean_domains(value)
        elif field == "role_map":
            value = clean_role_map(value)
        elif field in ("name", "client_id", "groups_claim"):
            value = str(value).strip()
            if not value:
                raise ValidationFailed(f"{field} must not be blank", details={"field": field})
        setattr(provider, field, value)
    if data.client_secret is not KEEP:
        provider.client_secret = {"value": str(data.client_secret)} if data.client_secret else None
    taken = _claimed_elsewhere(provider.email_domains, provider_id=provider.pk)
    if taken:
        # A domain leads a person to one provider: two providers claiming it would make sign-in ambiguous.
        raise Conflict(f"email_domains already belong to another provider: {', '.join(taken)}",
                       details={"field": "email_domains", "domains": taken})
    if provider.enforced and not provider.email_domains:
        raise ValidationFailed("enforced needs at least one email domain (it applies to members with those emails)",
                               details={"field": "enforced"})
    if IdentityProvider.objects.filter(tenant=provider.tenant, name=provider.name).exclude(pk=provider.pk).exists():
        raise Conflict(f"a provider named {provider.name!r} already exists in this tenant",
                       details={"field": "name"})


@transaction.atomic
def provider_create(*, tenant: Tenant, actor: Any, data: ProviderInput) -> IdentityProvider:
    """Add a company identity provider to the tenant (owners, admins)."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    for required in ("name", "issuer", "client_id"):
        if getattr(data, required) is KEEP:
            raise ValidationFailed(f"{required} is required", details={"field": required})
    provider = IdentityProvider(tenant=tenant, groups_claim="groups")
    _apply(provider, data)
    provider.save()
    return provider


@transaction.atomic
def provider_update(*, tenant: Tenant, actor: Any, provider_id: Any, changes: ProviderInput) -> IdentityProvider:
    """Change a provider; an omitted or empty client_secret keeps the stored one."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    provider = selectors.provider_get(tenant=tenant, provider_id=provider_id)
    if changes.client_secret == "":
        changes.client_secret = KEEP
    _apply(provider, changes)
    provider.save()
    return provider


@transaction.atomic
def provider_delete(*, tenant: Tenant, actor: Any, provider_id: Any) -> None:
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    selectors.provider_get(tenant=tenant, provider_id=provider_id).delete()


# --- SCIM tokens ---------------------------------------------------------------------------------------------


@transaction.atomic
def scim_token_create(*, tenant: Tenant, actor: Any) -> tuple[ScimToken, str]:
    """A new SCIM bearer token for the tenant: the row, and the token itself (shown once, only its hash is kept)."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    token = "scim_" + secrets.token_urlsafe(32)
    row = ScimToken.objects.create(tenant=tenant, token_hash=selectors.token_hash(token), prefix=token[:9],
                                   created_by=actor if getattr(actor, "pk", None) else None)
    return row, token


@transaction.atomic
def scim_token_delete(*, tenant: Tenant, actor: Any, token_id: Any) -> None:
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    try:
        ScimToken.objects.get(tenant=tenant, pk=int(token_id)).delete()
    except (ScimToken.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound() from None


# --- audit ---------------------------------------------------------------------------------------------------


def record(*, tenant: Tenant | None, kind: IdentityEventKind, actor: str, user: Any = None, provider: Any = None,
           subject: str = "", role: str = "", message: str = "", details: Mapping[str, Any] | None = None) -> None:
    """One audit row; callers pass names, ids and roles only (never a token or secret)."""
    IdentityEvent.objects.create(
        tenant=tenant, kind=kind, actor=actor[:150], provider=provider, subject=subject[:255],
        user=user if getattr(user, "pk", None) else None, username=(getattr(user, "username", "") or "")[:150],
        role=role, message=message[:500], details=dict(details or {}),
    )


# --- roles from groups ---------------------------------------------------------------------------------------


def role_from_groups(role_map: Mapping[str, str], groups: Iterable[str]) -> Role | None:
    """The highest role any of the groups maps to; None when none maps."""
    roles = [Role(role_map[g]) for g in groups if g in role_map]
    return max(roles, key=lambda r: ROLE_RANK[r]) if roles else None


def role_map_of(tenant: Tenant) -> dict[str, str]:
    """The tenant's group -> role mapping (every provider's together; a group named twice takes the higher)."""
    merged: dict[str, str] = {}
    for provider in IdentityProvider.objects.filter(tenant=tenant).only("role_map"):
        for group, role in provider.role_map.items():
            if group not in merged or ROLE_RANK[Role(role)] > ROLE_RANK[Role(merged[group])]:
                merged[group] = role
    return merged


def membership_from_groups(*, tenant: Tenant, user: Any, role: Role | None, actor: str, mapped: bool,
                           provider: Any = None) -> Role | None:
    """Make the user's membership match what their groups give: `role`, or none at all when a mapping exists and
    no group maps. Without a mapping (`mapped` False) an existing membership keeps its hand-set role.

    Returns the resulting role. The last owner of a tenant stays owner (tenants_app refuses otherwise)."""
    existing = Membership.objects.filter(tenant=tenant, user=user).first()
    before = existing.role if existing else ""
    if not mapped:
        if existing is not None:
            return Role(existing.role)
        created = tenant_services.membership_add(tenant=tenant, actor=None, username=user.username, role=Role.VIEWER)
        after: Role | None = Role(created.role)
    elif role is None:
        if existing is not None:
            try:
                tenant_services.membership_remove(tenant=tenant, actor=None, membership_id=existing.pk)
            except Conflict:
                return Role(existing.role)  # the last owner
        after = None
    elif existing is None:
        after = Role(tenant_services.membership_add(tenant=tenant, actor=None, username=user.username,
                                                    role=role).role)
    else:
        try:
            after = Role(tenant_services.membership_set_role(tenant=tenant, actor=None, membership_id=existing.pk,
                                                             role=role).role)
        except Conflict:
            after = Role(existing.role)
    if (after or "") != before:
        record(tenant=tenant, kind=IdentityEventKind.ROLE_CHANGED, actor=actor, user=user, provider=provider,
               role=after or "", message=f"role {before or 'none'} -> {after or 'none'} from groups",
               details={"before": before, "after": after or ""})
    return after


# --- company sign-in -----------------------------------------------------------------------------------------


def claimable(user: Any, tenant: Tenant) -> bool:
    """An existing account a tenant's sign-in or SCIM may take on: no operator, no member of another tenant."""
    if user.is_superuser:
        return False
    return not Membership.objects.filter(user=user).exclude(tenant=tenant).exists()


def _unique_username(email: str, subject: str) -> str:
    User = get_user_model()
    base = re.sub(r"[^\w.@+-]", "", email or "")[:140] or f"sso-{subject[:100]}"
    name, n = base, 1
    while User.objects.filter(username=name).exists():
        n += 1
        name = f"{base[:140]}-{n}"
    return name


def claim_groups(claims: Mapping[str, Any], groups_claim: str) -> list[str]:
    value = claims.get(groups_claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(g) for g in value if isinstance(g, (str, int))]
    return []


@transaction.atomic
def signin_complete(*, provider: IdentityProvider, claims: Mapping[str, Any]) -> tuple[Any, Role | None]:
    """The user a verified id token names (created on the first sign-in), with their role from the token's groups.

    Refuses (SignInRefused) an email outside the provider's domains, a deactivated user, and a person whose
    groups no longer give a role where the tenant maps groups."""
    tenant = provider.tenant
    subject = str(claims.get("sub") or "")
    email = str(claims.get("email") or "").strip().lower()
    if not subject:
        raise SignInRefused("the provider sent no subject (sub)")
    if provider.email_domains and selectors.email_domain(email) not in provider.email_domains:
        raise SignInRefused("this account's email is not in the domains this provider is set up for",
                            details={"email_domain": selectors.email_domain(email)})
    if claims.get("email_verified") is False:
        raise SignInRefused("the provider says this email address is not verified")
    User = get_user_model()
    link = IdentityLink.objects.select_related("user").filter(provider=provider, subject=subject).first()
    user: Any
    if link is not None:
        user = link.user
    else:
        user = User.objects.filter(email__iexact=email).order_by("pk").first() if email else None
        if user is not None and not claimable(user, tenant):
            # A tenant's provider vouches for its own people only: never an operator, never someone who belongs
            # to another tenant (that tenant's admins could otherwise take the account over by naming its domain).
            raise SignInRefused("an account with this email already exists outside this tenant; ask an operator "
                                "to link it")
        if user is None:
            user = User.objects.create(username=_unique_username(email, subject), email=email,
                                       first_name=str(claims.get("given_name") or "")[:150],
                                       last_name=str(claims.get("family_name") or "")[:150])
            user.set_unusable_password()
            user.save(update_fields=["password"])
        link = IdentityLink.objects.create(provider=provider, subject=subject, user=user)
    if not user.is_active:
        raise SignInRefused("this account is deactivated")
    link.last_login_at = timezone.now()
    link.save(update_fields=["last_login_at"])
    mapping = role_map_of(tenant)
    groups = claim_groups(claims, provider.groups_claim)
    role = membership_from_groups(tenant=tenant, user=user, role=role_from_groups(mapping, groups),
                                  actor=f"provider:{provider.name}", mapped=bool(mapping), provider=provider)
    if role is None:
        return user, None
    record(tenant=tenant, kind=IdentityEventKind.SIGNIN, actor=f"provider:{provider.name}", user=user,
           provider=provider, subject=subject, role=role, message=f"signed in through {provider.name}",
           details={"groups": groups[:50]})
    return user, role


def signin_failed(*, provider: IdentityProvider | None, reason: str, subject: str = "", user: Any = None) -> None:
    """Audit a refused company sign-in (in its own transaction: the refusal rolled everything else back)."""
    record(tenant=provider.tenant if provider else None, kind=IdentityEventKind.SIGNIN_FAILED,
           actor=f"provider:{provider.name}" if provider else "sso", provider=provider, subject=subject, user=user,
           message=reason)


# --- leavers -------------------------------------------------------------------------------------------------


@transaction.atomic
def member_offboard(*, tenant: Tenant, user: Any, actor: str, reason: str) -> dict[str, int]:
    """End, now, everything the user holds in the tenant: API token, gateway grants, OAuth connections (revoked
    upstream where offered), personal keys, sessions, pending approvals they asked for (expired, saying why), and
    the membership. A user left with no tenant is deactivated. Returns what was ended, by kind."""
    from agents_app.gateway.oauth.authorizations import authorizations_revoke_bound
    from tools_app.connections import grants as oauth_grants
    from tools_app.models import Approval, ApprovalStatus, ExpiryReason, UserCredential
    from tools_app.services import approvals as approval_services

    if getattr(user, "is_superuser", False):
        raise PermissionDenied("a platform operator is not deprovisioned through a tenant")
    ended: dict[str, int] = {}
    ended["api_tokens"] = Token.objects.filter(user=user).delete()[0]
    ended["gateway_grants"] = authorizations_revoke_bound(tenant=tenant, user_id=user.pk)
    ended["oauth_connections"] = oauth_grants.oauth_forget_user(tenant=tenant, user=user)
    ended["personal_keys"] = UserCredential.objects.filter(tenant=tenant, user=user).delete()[0]
    pending = list(Approval.objects.filter(tenant=tenant, requested_by=user, status=ApprovalStatus.PENDING)
                   .select_related("tool_call").select_for_update(of=("self",)))
    ended["approvals"] = approval_services.approvals_expire(tenant=tenant, approvals=pending,
                                                            reason=ExpiryReason.REQUESTER_REMOVED)
    membership = Membership.objects.filter(tenant=tenant, user=user).first()
    if membership is not None:
        Membership.objects.filter(pk=membership.pk).delete()  # no last-owner rule: the provider says they left
    ended["memberships"] = int(membership is not None)
    if not Membership.objects.filter(user=user).exists() and user.is_active:
        user.is_active = False
        user.save(update_fields=["is_active"])
    ended["sessions"] = sessions_end(user=user)
    record(tenant=tenant, kind=IdentityEventKind.OFFBOARDED, actor=actor, user=user, message=reason, details=ended)
    return ended


def sessions_end(*, user: Any) -> int:
    """Delete every browser session (admin, playground) signed in as the user."""
    ended = 0
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if str(session.get_decoded().get("_auth_user_id")) == str(user.pk):
            session.delete()
            ended += 1
    return ended


def scim_users_of(*, tenant: Tenant, users: Iterable[Any]) -> list[ScimUser]:
    return list(ScimUser.objects.filter(tenant=tenant, user__in=list(users)))
