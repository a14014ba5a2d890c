"""Who is calling the gateway: an API token's user (or an OAuth access token's consenting member), their role in
the tenant, the agent; remembered per token."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache
from rest_framework.authtoken.models import Token

from agents_app import selectors
from agents_app.gateway.tokens import grantee_for
from agents_app.models import Agent
from core import hotcache
from core.errors import NotFound
from tenants_app import auth_cache
from tenants_app.models import Role, Tenant
from tenants_app.policies import MEMBERS
from tenants_app.selectors import membership_get

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """One authenticated request to one agent's endpoint: the user, their role there, the agent."""

    user: Any
    tenant: Tenant
    role: Role
    agent: Agent
    # Through an OAuth access token: the client's registered name (audited), the key its sessions are bound
    # to (the client and member, so a refreshed token keeps them), and when the token expires (epoch seconds).
    client: str = ""
    session_key: str = ""
    expires_at: float | None = None
    token_id: int | None = None

    @property
    def may_call(self) -> bool:
        return MEMBERS.allows_role(self.role, user=self.user)

    @property
    def key(self) -> tuple[int, int]:
        return (int(self.user.pk), int(self.agent.pk))


# --- who is calling -------------------------------------------------------------------------------


def user_for_token(key: str) -> Any | None:
    """The active user an API token (`create_token`) belongs to, else None (the API's cached lookup)."""
    if not key or len(key) > 128:
        return None

    def load() -> tuple[Any, Any] | None:
        token = Token.objects.select_related("user").filter(key=key).first()
        return (token.user, token) if token is not None else None

    found = auth_cache.cached("token", key, load)
    if found is None or not found[0].is_active:
        return None
    return found[0]


def authenticate(*, token: str, tenant_slug: str, agent_id: str) -> Principal | None:
    """user_for_token (else an OAuth access token bound to this agent) + resolve in one go: None for a bad
    token, NotFound as resolve raises it."""
    user = user_for_token(token)
    if user is not None:
        return resolve(user=user, tenant_slug=tenant_slug, agent_id=agent_id)
    grantee = grantee_for(token=token, tenant_slug=tenant_slug, agent_id=agent_id)
    if grantee is None:
        return None
    principal = resolve(user=grantee.user, tenant_slug=tenant_slug, agent_id=agent_id)
    return dataclasses.replace(principal, client=grantee.client_name, session_key=grantee.session_key,
                               expires_at=grantee.expires_at, token_id=grantee.token_id)


def resolve(*, user: Any, tenant_slug: str, agent_id: str) -> Principal:
    """The caller's membership and the agent; NotFound alike for a foreign tenant, a missing or foreign agent.

    Warm, nothing here queries: the membership is cached (tenants_app.auth_cache) and the agent this user
    may use is kept in memory until the tenant's agents or anyone's grants change (core.hotcache).
    """
    membership = membership_get(user=user, tenant_slug=tenant_slug)
    tenant = membership.tenant

    def load() -> Agent | None:
        try:
            agent = selectors.agent_get(tenant=tenant, agent_id=agent_id)
        except NotFound:
            return None
        # Disabled or not granted: the same answer as a missing agent.
        return agent if selectors.agent_may_use(tenant=tenant, user=user, agent=agent) else None

    agent = hotcache.remembered("gateway-agent", (tenant.pk, user.pk, str(agent_id)),
                                (hotcache.AUTH, hotcache.tenant_scope(tenant.pk)), load)
    if agent is None:
        raise NotFound()
    return Principal(user=user, tenant=tenant, role=Role(membership.role), agent=agent)


# Principals of recent requests by (token digest, tenant slug, agent id), kept in core.hotcache under the
# generations of `auth` and their tenant: every change that could alter one bumps one of those, so a kept
# principal whose generations still stand is exactly what authenticate() would answer.
_PRINCIPALS = "gateway-principal"


def _principal_scopes(principal: Principal) -> tuple[str, ...]:
    return hotcache.AUTH, hotcache.tenant_scope(principal.tenant.pk)


def _remember_key(token: str, tenant_slug: str, agent_id: str) -> tuple[str, str, str]:
    return hashlib.sha256(token.encode()).hexdigest(), tenant_slug, str(agent_id)


def _remember_ttl() -> float:
    return float(min(settings.TOOLHUB_AUTH_CACHE_S, settings.TOOLHUB_HOT_CACHE_S))


def shared_cache_is_local() -> bool:
    """Whether the cache holding the generations is this process's memory (no Redis): reading it does no I/O,
    so the event loop may read it itself rather than hop to a worker thread."""
    return isinstance(caches["default"], LocMemCache | DummyCache)


def remembered_principal(*, token: str, tenant_slug: str, agent_id: str) -> Principal | None:
    """The principal an earlier request authenticated for this token and agent, if nothing it rests on has
    changed since (one read of two generation numbers); None when authenticate() must decide."""
    if _remember_ttl() <= 0:
        return None
    found: Principal | None = hotcache.recall(_PRINCIPALS, _remember_key(token, tenant_slug, agent_id),
                                              _principal_scopes)
    if found is not None and found.expires_at is not None and time.time() >= found.expires_at:
        return None  # an expired OAuth token: authenticate() refuses it
    return found


def authenticate_remembering(*, token: str, tenant_slug: str, agent_id: str) -> Principal | None:
    """authenticate(), answered from (and stored for) remembered_principal. Run inside a hotcache request
    scope (the gateway's db()), so the generations stored with a principal are those read before its rows."""
    found = remembered_principal(token=token, tenant_slug=tenant_slug, agent_id=agent_id)
    if found is not None:
        return found
    principal = authenticate(token=token, tenant_slug=tenant_slug, agent_id=agent_id)
    ttl = _remember_ttl()
    if principal is not None:
        hotcache.keep(_PRINCIPALS, _remember_key(token, tenant_slug, agent_id), _principal_scopes(principal), principal,
                      ttl=ttl)
    return principal


def refresh(principal: Principal) -> Principal:
    """The same principal with the agent (name, description, status) reloaded; NotFound once it is gone."""
    fresh = resolve(user=principal.user, tenant_slug=principal.tenant.slug, agent_id=str(principal.agent.pk))
    return dataclasses.replace(fresh, client=principal.client, session_key=principal.session_key,
                               expires_at=principal.expires_at)
