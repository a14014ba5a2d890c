"""Toolhub as an OAuth client of upstream servers: its redirect URI, its Client ID Metadata Document, and the
client it is at each authorization server (configured, its document, or registered once by RFC 7591)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from tenants_app.models import Tenant
from tools_app.configs.remote import RemoteConfig
from tools_app.connections import paths
from tools_app.models import OAuthRegistration
from tools_app.runtime.mcp import oauth
from tools_app.wiring.http import outbound_policy

CLIENT_NAME = "Toolhub"


def client_metadata_url(base_url: str) -> str:
    """Toolhub's Client ID Metadata Document: its URL is the client id where a server takes one (https only)."""
    return paths.absolute(base_url, paths.CLIENT_METADATA_PATH)


def client_metadata(base_url: str) -> dict[str, Any] | None:
    """The document served at client_metadata_url(base_url); None without an https public URL (a CIMD client id
    must be https)."""
    url = client_metadata_url(base_url)
    if not url.startswith("https://"):
        return None
    return oauth.client_metadata_document(url, redirect_uri=paths.redirect_uri(base_url), client_name=CLIENT_NAME,
                                          client_uri=base_url.rstrip("/") + "/")


def registration(*, tenant: Tenant, spec: RemoteConfig, found: oauth.Discovery, base_url: str) -> OAuthRegistration:
    """The configured client, else the one registered at this server before, else a new DCR (once)."""
    redirect_uri = paths.redirect_uri(base_url)
    if spec.auth.client_id:
        client = oauth.configured_client(found, spec.auth.client_id, spec.auth.client_secret)
        configured, _ = OAuthRegistration.objects.update_or_create(
            tenant=tenant, issuer=f"{found.issuer}#configured:{client.client_id}", redirect_uri=redirect_uri,
            defaults={"client_id": client.client_id,
                      "secret": {"client_secret": client.client_secret, "auth_method": client.auth_method}},
        )
        return configured
    document_url = client_metadata_url(base_url)
    if oauth.uses_client_metadata_document(found, document_url):
        by_document, _ = OAuthRegistration.objects.get_or_create(
            tenant=tenant, issuer=f"{found.issuer}#client-metadata", redirect_uri=redirect_uri,
            defaults={"client_id": document_url, "secret": {"auth_method": "none"}})
        return by_document
    existing = OAuthRegistration.objects.filter(tenant=tenant, issuer=found.issuer, redirect_uri=redirect_uri).first()
    if existing is not None:
        return existing
    client = oauth.register(found, redirect_uri=redirect_uri, client_name=f"Toolhub ({tenant.name})",
                            policy=outbound_policy())
    try:
        with transaction.atomic():
            return OAuthRegistration.objects.create(
                tenant=tenant, issuer=found.issuer, redirect_uri=redirect_uri, client_id=client.client_id,
                secret={"client_secret": client.client_secret, "auth_method": client.auth_method},
            )
    except IntegrityError:  # another process registered at the same moment: use theirs
        return OAuthRegistration.objects.get(tenant=tenant, issuer=found.issuer, redirect_uri=redirect_uri)
