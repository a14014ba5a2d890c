"""Connecting an OAuth tool: the connect link, its start in the member's browser, the provider's callback, the
stored (encrypted) grant.

Network steps (discovery, registration, the code exchange) run outside any transaction so no database lock
is held across an HTTP round trip; each write around them is its own `transaction.atomic` step.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import DomainError
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors
from tools_app.configs import load_config
from tools_app.configs.remote import RemoteConfig
from tools_app.connections import client, paths
from tools_app.errors import OAuthConnectFailed, OAuthFlowRefused, ToolError
from tools_app.models import OAuthConnection, OAuthFlow, OAuthStatus, Tool, ToolType
from tools_app.runtime.errors import RuntimeToolError
from tools_app.runtime.mcp import oauth
from tools_app.services.discovery import discover_if_unknown
from tools_app.wiring.http import outbound_policy
from tools_app.wiring.tokens import client_of, discovery_of


def _flow_ttl() -> int:
    return int(settings.TOOLHUB_OAUTH_FLOW_TTL_S)


def _session_hash(session_key: str | None) -> str:
    return hashlib.sha256((session_key or "").encode()).hexdigest() if session_key else ""


def oauth_config(tool: Tool) -> RemoteConfig:
    """The typed config of an OAuth tool; ToolError for any other tool."""
    spec = load_config(tool.type, tool.config) if tool.type == ToolType.REMOTE else None
    if not isinstance(spec, RemoteConfig) or spec.auth.type != "oauth2":
        raise ToolError(f"tool {tool.name!r} does not use OAuth (REMOTE config auth.type is not oauth2)",
                        details={"field": "config.auth.type"})
    return spec


def oauth_connect(*, tenant: Tenant, actor: Any, tool_id: Any, base_url: str) -> dict[str, Any]:
    """Start connecting a tool: a Toolhub link (`paths.START_PATH`) only this user can complete."""
    tool = selectors.tool_get(tenant=tenant, tool_id=tool_id)
    spec = oauth_config(tool)
    ensure_role(tenant=tenant, user=actor, at_least=Role.MEMBER if spec.auth.per_user else Role.ADMIN)
    redirect_uri = paths.redirect_uri(base_url)
    try:
        found = oauth.discover(spec.url, outbound_policy())
        registration = client.registration(tenant=tenant, spec=spec, found=found, base_url=base_url)
    except RuntimeToolError as exc:  # upstream's failure, typed: a 400 naming the step, never a 500
        raise OAuthConnectFailed.of(exc, tool.name) from None
    verifier, challenge = oauth.new_pkce()
    state = secrets.token_urlsafe(32)
    scopes = list(spec.auth.scopes) or found.scopes_supported
    link = oauth.authorize_url(found, client_of(registration), redirect_uri=redirect_uri, state=state,
                               code_challenge=challenge, scopes=scopes)
    ttl = _flow_ttl()
    with transaction.atomic():
        flow = OAuthFlow.objects.create(
            tenant=tenant, tool=tool, user=actor, shared=not spec.auth.per_user, state=state,
            secret={"code_verifier": verifier}, authorize_url=link, redirect_uri=redirect_uri,
            discovery={"resource": found.resource, "issuer": found.issuer, "metadata": found.metadata,
                       "scopes_supported": found.scopes_supported, "server_url": spec.url},
            registration=registration, expires_at=timezone.now() + dt.timedelta(seconds=ttl),
        )
    return {"authorize_url": paths.start_url(base_url, flow.pk), "expires_in": ttl}


def authorize_link_or_none(*, tenant: Tenant, actor: Any, tool_id: Any, base_url: str) -> str | None:
    """A connect link for a call that answered AUTHORIZATION_REQUIRED, or None when this caller may not
    connect the tool (or discovery fails now: the call's own message already says what to do)."""
    try:
        return str(oauth_connect(tenant=tenant, actor=actor, tool_id=tool_id, base_url=base_url)["authorize_url"])
    except (DomainError, RuntimeToolError):
        return None


def _refuse(message: str) -> OAuthFlowRefused:
    return OAuthFlowRefused(message)


@transaction.atomic
def oauth_flow_start(*, user: Any, flow_id: Any, session_key: str | None) -> str:
    """The provider's authorize URL, once the link's own user opens it; binds the flow to this browser."""
    flow = OAuthFlow.objects.select_for_update().filter(pk=flow_id).first()
    # Another user's link looks like no link at all: it connects nothing and says nothing about the tool.
    if flow is None or flow.user_id != getattr(user, "pk", None):
        raise _refuse("this connect link is not yours: ask for your own from the tool")
    if flow.used_at is not None or flow.expires_at <= timezone.now():
        raise _refuse("this connect link has expired or was used: start connecting again")
    wanted = _session_hash(session_key)
    if flow.session_hash and flow.session_hash != wanted:
        raise _refuse("this connect link was opened in another browser: start connecting again")
    if not flow.session_hash:
        flow.session_hash = wanted
        flow.save(update_fields=["session_hash"])
    return flow.authorize_url


@transaction.atomic
def _claim(*, user: Any, state: str, session_key: str | None) -> tuple[OAuthFlow, str]:
    flow = OAuthFlow.objects.select_for_update().filter(state=state).first() if state else None
    if flow is None or flow.user_id != getattr(user, "pk", None):
        raise _refuse("this authorization does not belong to you: nothing was connected")
    if not flow.session_hash or flow.session_hash != _session_hash(session_key):
        raise _refuse("this authorization was started in another browser session: nothing was connected")
    if flow.used_at is not None:
        raise _refuse("this authorization was already completed: nothing more was connected")
    if flow.expires_at <= timezone.now():
        raise _refuse("this authorization took too long and expired: start connecting again")
    verifier = (flow.secret or {}).get("code_verifier", "")
    # Single use: the state and the verifier are spent before the code goes anywhere.
    flow.used_at, flow.secret = timezone.now(), None
    flow.save(update_fields=["used_at", "secret"])
    return flow, verifier


def oauth_flow_complete(*, user: Any, session_key: str | None, state: str, code: str, error: str = "") -> OAuthConnection:
    """The provider sent the browser back: check state, user, session and expiry, exchange the code once."""
    flow, verifier = _claim(user=user, state=state, session_key=session_key)
    if error or not code:
        reason = error if error.replace("_", "").isalpha() and len(error) <= 40 else "no code"
        raise _refuse(f"the provider did not authorize ({reason}): nothing was connected")
    registration = flow.registration
    found = discovery_of(flow.discovery)
    tokens = oauth.exchange_code(found, client_of(registration), code=code, code_verifier=verifier,
                                 redirect_uri=flow.redirect_uri, policy=outbound_policy())
    connection = _store(flow=flow, tokens=tokens, found=found)

    discover_if_unknown(flow.tool, user)
    return connection


@transaction.atomic
def _store(*, flow: OAuthFlow, tokens: oauth.Tokens, found: oauth.Discovery) -> OAuthConnection:
    expires = dt.datetime.fromtimestamp(tokens.expires_at, tz=dt.UTC) if tokens.expires_at else None
    connection, _ = OAuthConnection.objects.update_or_create(
        tenant=flow.tenant, tool=flow.tool, user=None if flow.shared else flow.user,
        defaults={
            "connected_by": flow.user, "status": OAuthStatus.CONNECTED, "expires_at": expires,
            "tokens": {"access_token": tokens.access_token, "refresh_token": tokens.refresh_token},
            "scopes": tokens.scope, "registration": flow.registration,
            "discovery": {"resource": found.resource, "issuer": found.issuer, "metadata": found.metadata,
                          "scopes_supported": found.scopes_supported,
                          "server_url": flow.discovery.get("server_url", "")},
        },
    )
    return connection
