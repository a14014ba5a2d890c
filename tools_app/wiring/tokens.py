"""The access token an OAuth tool's REMOTE spec carries (`RemoteSpec.token`): the shared or per-user connection's
token, refreshed before expiry or after a 401, and why a call must be authorized first. A runtime input made from
rows, so it lives with the other wiring, below tool discovery and the invoke path; the connect flow that stores
the grants is `tools_app.connections`, above them."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections, transaction
from django.utils import timezone

from tenants_app.models import Tenant
from tools_app import selectors
from tools_app.configs.auth import is_per_user
from tools_app.models import OAuthConnection, OAuthRegistration, OAuthStatus, Tool
from tools_app.runtime.errors import AuthorizationNeeded
from tools_app.runtime.mcp import oauth
from tools_app.wiring.http import outbound_policy


def client_of(registration: OAuthRegistration) -> oauth.Client:
    secret = registration.secret or {}
    return oauth.Client(client_id=registration.client_id, client_secret=secret.get("client_secret", ""),
                        auth_method=secret.get("auth_method", "none"))


def discovery_of(data: dict[str, Any]) -> oauth.Discovery:
    return oauth.Discovery(resource=data["resource"], issuer=data["issuer"], metadata=data["metadata"],
                           scopes_supported=list(data.get("scopes_supported") or []))


REFRESH_SKEW_S = 30  # refresh this long before the access token's stated expiry


def token_provider(*, tenant_id: int, tool_id: int, user_id: int | None, per_user: bool) -> Callable[[str | None], str]:
    """The REMOTE runtime's token provider (see RemoteSpec.token): the tool's shared connection, or with `per_user`
    the connection of `user_id` (None: a call nobody signed for, which has none)."""
    return functools.partial(_access_token, tenant_id=tenant_id, tool_id=tool_id, user_id=user_id, per_user=per_user)


def _access_token(stale: str | None, *, tenant_id: int, tool_id: int, user_id: int | None = None,
                  per_user: bool = False) -> str:
    """A usable access token, refreshed before expiry or after a 401 of `stale`.

    Serialized per connection across processes: the row is locked (SQLite: the IMMEDIATE write transaction;
    PostgreSQL: SELECT ... FOR UPDATE) while a refresh is in flight, so a rotating refresh token is presented
    once; whoever waited reads the token the first one stored and does not refresh again.
    """
    try:
        token, revoked = (None, False) if per_user and user_id is None else \
            _token_locked(stale, tenant_id=tenant_id, tool_id=tool_id, user_id=user_id)
    finally:
        close_old_connections()  # runs in the pool's worker threads: give their connection back
    if revoked or token is None:
        raise AuthorizationNeeded(_needs_authorization(tool_id, per_user=per_user, revoked=revoked),
                                  details={"tool_id": tool_id, "per_user": per_user})
    return token


def _needs_authorization(tool_id: Any, *, per_user: bool, revoked: bool) -> str:
    if revoked:
        whose = "your own OAuth connection to this tool" if per_user else "this tool's OAuth connection"
        return f"{whose} needs authorization: connect it again (POST /api/v1/tools/{tool_id}/oauth/connect/)"
    who = "you have not connected your own account to this tool" if per_user else "this tool is not connected"
    return f"{who}: connect it (POST /api/v1/tools/{tool_id}/oauth/connect/)"


def not_connected(*, tenant: Tenant, tool: Tool, user: Any) -> str | None:
    """Why a call of an OAuth tool needs authorization first: the caller has no connected connection to it (the
    shared one, or their own with `per_user`). None for other tools and for a connected caller."""
    state = selectors.oauth_state(tenant=tenant, tool=tool, user=user)
    if state is None or state["connected"]:
        return None
    return _needs_authorization(tool.pk, per_user=is_per_user(tool), revoked=state["status"] != "not_connected")


@transaction.atomic
def _token_locked(stale: str | None, *, tenant_id: int, tool_id: int, user_id: int | None) -> tuple[str | None, bool]:
    owner = {"user_id": user_id} if user_id is not None else {"user__isnull": True}
    connection = OAuthConnection.objects.select_for_update().filter(tenant_id=tenant_id, tool_id=tool_id, **owner).first()
    if connection is None:
        return None, False
    if connection.status != OAuthStatus.CONNECTED:
        return None, True
    url = ((Tool.objects.filter(pk=tool_id).values_list("config", flat=True).first() or {}).get("url"))
    if url != connection.discovery.get("server_url"):
        # The tool points elsewhere now: its tokens are never sent to a server they were not issued for.
        connection.status, connection.tokens = OAuthStatus.NEEDS_AUTHORIZATION, None
        connection.save(update_fields=["status", "tokens", "updated_at"])
        return None, True
    tokens = dict(connection.tokens or {})
    current = tokens.get("access_token", "")
    soon = timezone.now() + dt.timedelta(seconds=REFRESH_SKEW_S)
    fresh_enough = connection.expires_at is None or connection.expires_at > soon
    if current and (stale != current) and (stale is not None or fresh_enough):
        return current, False  # valid, or another caller refreshed since `stale` was refused
    if not tokens.get("refresh_token"):
        connection.status = OAuthStatus.NEEDS_AUTHORIZATION
        connection.save(update_fields=["status", "updated_at"])
        return None, True
    try:
        new = oauth.refresh(discovery_of(connection.discovery), client_of(connection.registration),
                            refresh_token=tokens["refresh_token"], policy=outbound_policy())
    except oauth.GrantInvalid:
        # The grant is gone (revoked, or a refresh token reused): stop presenting it and ask for a new one.
        connection.status, connection.tokens = OAuthStatus.NEEDS_AUTHORIZATION, None
        connection.save(update_fields=["status", "tokens", "updated_at"])
        return None, True
    connection.tokens = {"access_token": new.access_token, "refresh_token": new.refresh_token}
    connection.expires_at = dt.datetime.fromtimestamp(new.expires_at, tz=dt.UTC) if new.expires_at else None
    connection.scopes = new.scope or connection.scopes
    connection.save(update_fields=["tokens", "expires_at", "scopes", "updated_at"])
    return new.access_token, False
