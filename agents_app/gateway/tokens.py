"""The resource server's check: an OAuth access token presented at one agent's gateway URL, read from
django-oauth-toolkit's rows (stored hashed: looked up by checksum). Valid only unexpired, with the `mcp` scope,
for an active user, from a registered client, and bound (RFC 8707) to exactly this agent."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from oauth2_provider.models import get_access_token_model

from agents_app.gateway.resource import SCOPE, bound_agent


@dataclass(frozen=True)
class Grantee:
    """Whom a valid access token acts for, through which client, until when."""

    user: Any
    client_name: str
    # Sessions outlive one access token (refresh rotates it): they are bound to the client and the member.
    session_key: str
    expires_at: float
    token_id: int | None = None  # the access token's row: calls through it mark its last use


def grantee_for(*, token: str, tenant_slug: str, agent_id: str) -> Grantee | None:
    """The grantee of `token` at /mcp/<tenant_slug>/agents/<agent_id>/, else None (unknown, expired, revoked,
    another agent's, a registration token, a user gone or inactive)."""
    if not token or len(token) > 512:
        return None
    checksum = hashlib.sha256(token.encode()).hexdigest()
    row = (get_access_token_model().objects.select_related("user", "application")
           .filter(token_checksum=checksum).first())
    if row is None or row.is_expired() or row.application is None or row.user is None or not row.user.is_active:
        return None
    if SCOPE not in row.scope.split() or bound_agent(list(row.resource or [])) != (tenant_slug, str(agent_id)):
        return None
    key = hashlib.sha256(f"oauth:{row.application.client_id}:{row.user.pk}".encode()).hexdigest()
    return Grantee(user=row.user, client_name=row.application.name, session_key=key,
                   expires_at=row.expires.timestamp(), token_id=row.pk)
