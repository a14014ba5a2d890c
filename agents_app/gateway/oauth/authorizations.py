"""What members granted OAuth clients at an agent (read), and taking it back (write): an authorization is a
client and a member with live tokens bound to the agent. Revoking one revokes its refresh tokens (which deletes
their access tokens) and any access token or unused code left; going away (the agent, or a membership) does the
same for everything bound to it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model

from agents_app.gateway.resource import bound_agent
from core.errors import NotFound, PermissionDenied
from tenants_app.models import Membership, Role, Tenant
from tenants_app.permissions import ensure_role


@dataclass(frozen=True)
class Authorization:
    """One client a member authorized for one agent."""

    client_id: str
    client_name: str
    user_id: int
    username: str
    granted_at: datetime
    last_used: datetime  # the latest call through one of its tokens, or token issued (a refresh is a use)
    expires: datetime | None


def _used(row: Any) -> datetime:
    """A token row's last use: issued (`created`), or a call through it (agents_app.gateway.oauth.usage)."""
    created: datetime = row.created
    updated: datetime = row.updated
    return max(created, updated)


def _bound(rows: Iterable[Any], tenant: Tenant, agent_id: Any | None) -> list[Any]:
    def binds(row: Any) -> bool:
        found = bound_agent(list(row.resource or []))
        return found is not None and found[0] == tenant.slug and (agent_id is None or found[1] == str(agent_id))

    return [row for row in rows if binds(row)]


def _tenant_members(tenant: Tenant) -> Any:
    return Membership.objects.filter(tenant=tenant).values("user_id")


def _live_rows(tenant: Tenant, *, agent_id: Any | None = None, user_id: Any | None = None,
               client_id: str | None = None) -> tuple[list[Any], list[Any], list[Any]]:
    """(access tokens, refresh tokens, grants) of this tenant's members bound to the agent (any of the tenant's)."""
    def narrowed(qs: Any) -> Any:
        qs = qs.filter(user__isnull=False, application__isnull=False).select_related("application", "user")
        qs = qs.filter(user_id=user_id) if user_id is not None else qs.filter(user_id__in=_tenant_members(tenant))
        return qs.filter(application__client_id=client_id) if client_id is not None else qs

    access = narrowed(get_access_token_model().objects.all())
    refresh = narrowed(get_refresh_token_model().objects.filter(revoked__isnull=True))
    grants = narrowed(get_grant_model().objects.all())
    return _bound(access, tenant, agent_id), _bound(refresh, tenant, agent_id), _bound(grants, tenant, agent_id)


def authorizations_for_agent(*, tenant: Tenant, agent_id: Any, user_id: Any | None = None) -> list[Authorization]:
    """The clients authorized at this agent (all members', or one member's), newest use first."""
    access, refresh, _grants = _live_rows(tenant, agent_id=agent_id, user_id=user_id)
    now = timezone.now()
    found: dict[tuple[str, int], Authorization] = {}
    for row in [*refresh, *(a for a in access if a.expires > now)]:
        key = (row.application.client_id, row.user_id)
        expires = getattr(row, "expires", None)
        seen = found.get(key)
        if seen is None:
            found[key] = Authorization(client_id=key[0], client_name=row.application.name, user_id=row.user_id,
                                       username=row.user.get_username(), granted_at=row.created,
                                       last_used=_used(row), expires=expires)
        else:
            found[key] = Authorization(
                client_id=seen.client_id, client_name=seen.client_name, user_id=seen.user_id, username=seen.username,
                granted_at=min(seen.granted_at, row.created), last_used=max(seen.last_used, _used(row)),
                expires=max((e for e in (seen.expires, expires) if e is not None), default=None))
    return sorted(found.values(), key=lambda a: a.last_used, reverse=True)


def _revoke_rows(access: list[Any], refresh: list[Any], grants: list[Any]) -> int:
    for row in refresh:
        row.revoke()  # revokes the refresh token and deletes its access token
    leftover = get_access_token_model().objects.filter(pk__in=[a.pk for a in access])
    count: int = len(refresh) + leftover.count()
    for token in leftover:
        token.delete()  # one by one: each delete drops remembered gateway principals (signals)
    get_grant_model().objects.filter(pk__in=[g.pk for g in grants]).delete()
    return count


@transaction.atomic
def authorization_revoke(*, tenant: Tenant, actor: Any, agent_id: Any, client_id: str, user_id: Any) -> int:
    """Revoke what `user_id` granted `client_id` at the agent: a tenant admin may revoke anyone's, a member their
    own. Answers how many tokens were revoked; NotFound when there was nothing to revoke."""
    if str(getattr(actor, "pk", "")) != str(user_id):
        try:
            ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
        except PermissionDenied:
            raise NotFound() from None
    rows = _live_rows(tenant, agent_id=agent_id, user_id=user_id, client_id=client_id)
    if not any(rows):
        raise NotFound()
    return _revoke_rows(*rows)


def authorizations_revoke_bound(*, tenant: Tenant, agent_id: Any | None = None, user_id: Any | None = None) -> int:
    """Revoke everything bound to an agent that is going away, or everything a member who is leaving granted in
    the tenant: their tokens could never be used again, and must not outlive it (a reused id, a re-added member)."""
    return _revoke_rows(*_live_rows(tenant, agent_id=agent_id, user_id=user_id))


@dataclass(frozen=True)
class MyAuthorization:
    """One client the signed-in member authorized, at one agent of one of their tenants."""

    client_id: str
    client_name: str
    tenant_slug: str
    agent_id: str
    last_used: datetime


def authorizations_of_user(*, user: Any) -> list[MyAuthorization]:
    """Every client `user` authorized, at which agent, newest use first (their own tokens only)."""
    now = timezone.now()
    rows = [
        *get_refresh_token_model().objects.filter(user=user, revoked__isnull=True, application__isnull=False)
        .select_related("application"),
        *get_access_token_model().objects.filter(user=user, application__isnull=False, expires__gt=now)
        .select_related("application"),
    ]
    found: dict[tuple[str, str, str], MyAuthorization] = {}
    for row in rows:
        bound = bound_agent(list(row.resource or []))
        if bound is None:
            continue
        key = (row.application.client_id, *bound)
        seen = found.get(key)
        if seen is None or _used(row) > seen.last_used:
            found[key] = MyAuthorization(client_id=key[0], client_name=row.application.name, tenant_slug=bound[0],
                                         agent_id=bound[1], last_used=_used(row))
    return sorted(found.values(), key=lambda a: a.last_used, reverse=True)
