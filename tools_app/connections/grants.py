"""Ending stored OAuth grants: a member's disconnect, a leaver's connections; each revoked upstream where the
server offers it (RFC 7009)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.outbound import OutboundPolicy
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors
from tools_app.connections.oauth_flow import oauth_config
from tools_app.models import OAuthConnection, Tool
from tools_app.runtime.mcp import oauth
from tools_app.wiring.http import outbound_policy
from tools_app.wiring.tokens import client_of, discovery_of

Gone = tuple[dict[str, str], oauth.Discovery, oauth.Client]


def oauth_disconnect(*, tenant: Tenant, actor: Any, tool_id: Any) -> bool:
    """Forget the caller's connection (the shared one: owner/admin), revoking it upstream where offered (RFC 7009)."""
    tool = selectors.tool_get(tenant=tenant, tool_id=tool_id)
    spec = oauth_config(tool)
    ensure_role(tenant=tenant, user=actor, at_least=Role.MEMBER if spec.auth.per_user else Role.ADMIN)
    gone = _forget(tenant=tenant, tool=tool, user=actor if spec.auth.per_user else None)
    if gone is None:
        return False
    _revoke(gone, outbound_policy())
    return True


def oauth_forget_user(*, tenant: Tenant, user: Any) -> int:
    """End every personal connection `user` holds in `tenant` (a leaver): gone now, revoked upstream (RFC 7009)
    after commit where the server offers it. Returns how many were ended."""
    gone = [_forget(tenant=tenant, tool=c.tool, user=user)
            for c in OAuthConnection.objects.filter(tenant=tenant, user=user).select_related("tool")]
    policy = outbound_policy()

    def revoke() -> None:
        for each in filter(None, gone):
            _revoke(each, policy)

    transaction.on_commit(revoke)
    return len(gone)


def _revoke(gone: Gone, policy: OutboundPolicy) -> None:
    tokens, found, client = gone
    for hint in ("refresh_token", "access_token"):
        if tokens.get(hint):
            oauth.revoke(found, client, token=tokens[hint], hint=hint, policy=policy)


@transaction.atomic
def _forget(*, tenant: Tenant, tool: Tool, user: Any) -> Gone | None:
    connection = OAuthConnection.objects.select_for_update().filter(tenant=tenant, tool=tool, user=user).first()
    if connection is None:
        return None
    gone = (dict(connection.tokens or {}), discovery_of(connection.discovery), client_of(connection.registration))
    connection.delete()
    return gone
