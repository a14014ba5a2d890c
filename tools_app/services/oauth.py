"""OAuth connections of REMOTE tools: connect links, the browser round trip, stored (encrypted) grants.

Network steps (discovery, registration, the code exchange) run outside any transaction so no database lock
is held across an HTTP round trip; each write around them is its own `transaction.atomic` step.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import DomainError
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors
from tools_app.configs import load_config
from tools_app.configs.remote import RemoteConfig
from tools_app.errors import OAuthConnectFailed, OAuthFlowRefused, ToolError
from tools_app.models import OAuthConnection, OAuthFlow, OAuthRegistration, OAuthStatus, Tool, ToolType
from tools_app.runtime.errors import RuntimeToolError
from tools_app.runtime.mcp import oauth
from tools_app.services.discovery import discover_if_unknown
from tools_app.services.oauth_tokens import client_of as _client
from tools_app.services.oauth_tokens import discovery_of as _discovery
from tools_app.wiring.http import outbound_policy

CALLBACK_PATH = "/oauth/callback/"
CLIENT_METADATA_PATH = "/oauth/client-metadata.json"
CLIENT_NAME = "Toolhub"


def client_metadata_url(base_url: str) -> str:
    """Toolhub's Client ID Metadata Document: its URL is the client id where a server takes one (https only)."""
    return base_url.rstrip("/") + CLIENT_METADATA_PATH


def client_metadata(base_url: str) -> dict[str, Any] | None:
    """The document served at client_metadata_url(base_url); None without an https public URL (a CIMD client id
    must be https)."""
    url = client_metadata_url(base_url)
    if not url.startswith("https://"):
        return None
    return oauth.client_metadata_document(url, redirect_uri=base_url.rstrip("/") + CALLBACK_PATH,
                                          client_name=CLIENT_NAME, client_uri=base_url.rstrip("/") + "/")


def _flow_ttl() -> int:
    return int(settings.TOOLHUB_OAUTH_FLOW_TTL_S)


def _session_hash(session_key: str | None) -> str:
    return hashlib.sha256((session_key or "").encode()).hexdigest() if session_key else ""


def _oauth_config(tool: Tool) -> RemoteConfig:
    spec = load_config(tool.type, tool.config) if tool.type == ToolType.REMOTE else None
    if not isinstance(spec, RemoteConfig) or spec.auth.type != "oauth2":
        raise ToolError(f"tool {tool.name!r} does not use OAuth (REMOTE config auth.type is not oauth2)",
                        details={"field": "config.auth.type"})
    return spec


def _registration(*, tenant: Tenant, spec: RemoteConfig, found: oauth.Discovery, redirect_uri: str) -> OAuthRegistration:
    """The configured client, else the one registered at this server before, else a new DCR (once)."""
    policy = outbound_policy()
    if spec.auth.client_id:
        client = oauth.configured_client(found, spec.auth.client_id, spec.auth.client_secret)
        registration, _ = OAuthRegistration.objects.update_or_create(
            tenant=tenant, issuer=f"{found.issuer}#configured:{client.client_id}", redirect_uri=redirect_uri,
            defaults={"client_id": client.client_id,
                      "secret": {"client_secret": client.client_secret, "auth_method": client.auth_method}},
        )
        return registration
    document_url = client_metadata_url(redirect_uri.removesuffix(CALLBACK_PATH))
    if oauth.uses_client_metadata_document(found, document_url):
        registration, _ = OAuthRegistration.objects.get_or_create(
            tenant=tenant, issuer=f"{found.issuer}#client-metadata", redirect_uri=redirect_uri,
            defaults={"client_id": document_url, "secret": {"auth_method": "none"}})
        return registration
    existing = OAuthRegistration.objects.filter(tenant=tenant, issuer=found.issuer, redirect_uri=redirect_uri).first()
    if existing is not None:
        return existing
    client = oauth.register(found, redirect_uri=redirect_uri, client_name=f"Toolhub ({tenant.name})", policy=policy)
    try:
        with transaction.atomic():
            return OAuthRegistration.objects.create(
                tenant=tenant, issuer=found.issuer, redirect_uri=redirect_uri, client_id=client.client_id,
                secret={"client_secret": client.client_secret, "auth_method": client.auth_method},
            )
    except IntegrityError:  # another process registered at the same moment: use theirs
        return OAuthRegistration.objects.get(tenant=tenant, issuer=found.issuer, redirect_uri=redirect_uri)


def oauth_connect(*, tenant: Tenant, actor: Any, tool_id: Any, base_url: str) -> dict[str, Any]:
    """Start connecting a tool: a Toolhub link (`/oauth/start/<flow>/`) only this user can complete."""
    tool = selectors.tool_get(tenant=tenant, tool_id=tool_id)
    spec = _oauth_config(tool)
    ensure_role(tenant=tenant, user=actor, at_least=Role.MEMBER if spec.auth.per_user else Role.ADMIN)
    redirect_uri = base_url.rstrip("/") + CALLBACK_PATH
    try:
        found = oauth.discover(spec.url, outbound_policy())
        registration = _registration(tenant=tenant, spec=spec, found=found, redirect_uri=redirect_uri)
    except RuntimeToolError as exc:  # upstream's failure, typed: a 400 naming the step, never a 500
        raise OAuthConnectFailed.of(exc, tool.name) from None
    verifier, challenge = oauth.new_pkce()
    state = secrets.token_urlsafe(32)
    scopes = list(spec.auth.scopes) or found.scopes_supported
    link = oauth.authorize_url(found, _client(registration), redirect_uri=redirect_uri, state=state,
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
    return {"authorize_url": f"{base_url.rstrip('/')}/oauth/start/{flow.pk}/", "expires_in": ttl}


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
    found = _discovery(flow.discovery)
    tokens = oauth.exchange_code(found, _client(registration), code=code, code_verifier=verifier,
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


def oauth_disconnect(*, tenant: Tenant, actor: Any, tool_id: Any) -> bool:
    """Forget the caller's connection (the shared one: owner/admin), revoking it upstream where offered (RFC 7009)."""
    tool = selectors.tool_get(tenant=tenant, tool_id=tool_id)
    spec = _oauth_config(tool)
    ensure_role(tenant=tenant, user=actor, at_least=Role.MEMBER if spec.auth.per_user else Role.ADMIN)
    gone = _forget(tenant=tenant, tool=tool, user=actor if spec.auth.per_user else None)
    if gone is None:
        return False
    tokens, found, client = gone
    policy = outbound_policy()
    for hint in ("refresh_token", "access_token"):
        if tokens.get(hint):
            oauth.revoke(found, client, token=tokens[hint], hint=hint, policy=policy)
    return True


def oauth_forget_user(*, tenant: Tenant, user: Any) -> int:
    """End every personal connection `user` holds in `tenant` (a leaver): gone now, revoked upstream (RFC 7009)
    after commit where the server offers it. Returns how many were ended."""
    gone = [_forget(tenant=tenant, tool=c.tool, user=user)
            for c in OAuthConnection.objects.filter(tenant=tenant, user=user).select_related("tool")]
    policy = outbound_policy()

    def revoke() -> None:
        for tokens, found, client in filter(None, gone):
            for hint in ("refresh_token", "access_token"):
                if tokens.get(hint):
                    oauth.revoke(found, client, token=tokens[hint], hint=hint, policy=policy)

    transaction.on_commit(revoke)
    return len(gone)


@transaction.atomic
def _forget(*, tenant: Tenant, tool: Tool, user: Any) -> tuple[dict[str, str], oauth.Discovery, oauth.Client] | None:
    connection = OAuthConnection.objects.select_for_update().filter(tenant=tenant, tool=tool, user=user).first()
    if connection is None:
        return None
    gone = (dict(connection.tokens or {}), _discovery(connection.discovery), _client(connection.registration))
    connection.delete()
    return gone


def authorize_link_or_none(*, tenant: Tenant, actor: Any, tool_id: Any, base_url: str) -> str | None:
    """A connect link for a call that answered AUTHORIZATION_REQUIRED, or None when this caller may not
    connect the tool (or discovery fails now: the call's own message already says what to do)."""
    try:
        return str(oauth_connect(tenant=tenant, actor=actor, tool_id=tool_id, base_url=base_url)["authorize_url"])
    except (DomainError, RuntimeToolError):
        return None
