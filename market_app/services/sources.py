"""Create, update and delete market sources; auth headers are encrypted, write-only and masked-merged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.errors import PermissionDenied
from core.secrets import KEEP, kept_keys, merge_masked, require_secrets_on_move
from market_app import selectors
from market_app.errors import InvalidSource
from market_app.models import CatalogFormat, MarketSource
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app.configs.base import HEADER_NAME, check_http_url

INTERVAL_RANGE = (1, 7 * 24 * 60)
AUTH_MAPS = ("auth_headers",)  # the secret map of a source


@dataclass
class SourceInput:
    """Validated API/admin input; None (or KEEP for auth_headers) leaves a field as it is."""

    name: str | None = None
    url: str | None = None
    format: str | None = None
    auth_headers: Any = KEEP
    enabled: bool | None = None
    refresh_interval_min: int | None = None
    is_global: bool | None = None


def ensure_can_manage(*, tenant: Tenant | None, actor: Any, source: MarketSource) -> None:
    """Global sources belong to superusers; a tenant's own sources to its owners and admins."""
    if source.tenant_id is None or tenant is None:
        if not getattr(actor, "is_superuser", False):
            raise PermissionDenied(
                "Global market sources are managed by superusers; add a source of your own tenant instead.",
                details={"required": "superuser"},
            )
        return
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)


def merge_auth_headers(*, stored: dict[str, str] | None, incoming: Any) -> dict[str, str] | None:
    """Omitted or "" keeps, null or {} clears, an object replaces with "********" keeping a stored value."""
    if incoming is KEEP or incoming == "":
        return stored
    if incoming is None:
        return None
    if not isinstance(incoming, dict):
        raise InvalidSource('auth_headers must be an object of header name: value, "" or null',
                            details={"field": "auth_headers"})
    for key, value in incoming.items():
        if not isinstance(key, str) or not HEADER_NAME.match(key):
            raise InvalidSource(f"auth_headers: {str(key)[:100]!r} is not a valid HTTP header name",
                                details={"field": "auth_headers"})
        # Name the key, never the value: it is a secret.
        if not isinstance(value, str) or not value or "\r" in value or "\n" in value:
            raise InvalidSource(f"auth_headers.{key} must be a non-empty single-line string",
                                details={"field": f"auth_headers.{key}"})
    merged = merge_masked(stored={"auth_headers": stored or {}}, incoming={"auth_headers": incoming},
                          secret_maps=AUTH_MAPS, prefix="", error=InvalidSource)
    return merged["auth_headers"] or None


def _kept_headers(source: MarketSource, incoming: Any) -> list[str]:
    """Stored auth headers the change keeps: all of them when omitted, the masked ones of an object."""
    stored = source.auth_headers or {}
    if incoming is KEEP or incoming == "":
        return [f"auth_headers.{k}" for k, v in stored.items() if v]
    if isinstance(incoming, dict):
        return kept_keys(stored={"auth_headers": stored}, incoming={"auth_headers": incoming}, secret_maps=AUTH_MAPS)
    return []


def _check_url(url: str) -> str:
    try:
        check_http_url(url.strip())  # the tool config's URL rule: http(s), a host, a valid port
    except ValueError as exc:
        raise InvalidSource(f"url {exc}", details={"field": "url"}) from None
    if len(url) > 500:
        raise InvalidSource("url is longer than 500 characters", details={"field": "url"})
    return url.strip()


def _apply(source: MarketSource, data: SourceInput) -> None:
    if data.name is not None:
        name = data.name.strip()
        if not name or len(name) > 100:
            raise InvalidSource("name must be 1 to 100 characters", details={"field": "name"})
        source.name = name
    if data.url is not None:
        url = _check_url(data.url)
        if source.url:
            require_secrets_on_move(old_url=source.url, new_url=url, kept=_kept_headers(source, data.auth_headers),
                                    field="url")
        if url != source.url:
            source.url, source.cursor = url, ""  # an incremental cursor belongs to the old URL
    if data.format is not None:
        if data.format not in CatalogFormat.values:
            raise InvalidSource(f"format {data.format!r} is invalid; accepted: {', '.join(CatalogFormat.values)}",
                                details={"field": "format", "accepted": list(CatalogFormat.values)})
        if data.format != source.format:
            source.format, source.cursor = data.format, ""
    if data.enabled is not None:
        source.enabled = data.enabled
    if data.refresh_interval_min is not None:
        lo, hi = INTERVAL_RANGE
        if not lo <= data.refresh_interval_min <= hi:
            raise InvalidSource(f"refresh_interval_min must be from {lo} to {hi}",
                                details={"field": "refresh_interval_min", "accepted": [lo, hi]})
        source.refresh_interval_min = data.refresh_interval_min
    source.auth_headers = merge_auth_headers(stored=source.auth_headers, incoming=data.auth_headers)


@transaction.atomic
def source_create(*, tenant: Tenant | None, actor: Any, data: SourceInput) -> MarketSource:
    """A source of `tenant`, or a global one (`is_global`, superusers only)."""
    if tenant is None and not data.is_global:
        raise InvalidSource("a tenant source needs a tenant", details={"field": "tenant"})
    source = MarketSource(tenant=None if data.is_global else tenant)
    ensure_can_manage(tenant=tenant, actor=actor, source=source)
    if not data.name or not data.url:
        missing = [f for f in ("name", "url") if not getattr(data, f)]
        raise InvalidSource(f"{' and '.join(missing)} required", details={"fields": missing})
    _apply(source, data)
    source.save()
    return selectors.source_get(tenant=tenant, source_id=source.pk)


@transaction.atomic
def source_update(*, tenant: Tenant | None, actor: Any, source_id: Any, changes: SourceInput) -> MarketSource:
    """Change a visible source the actor may manage; its scope (global or tenant) never changes."""
    source = selectors.source_get(tenant=tenant, source_id=source_id)
    ensure_can_manage(tenant=tenant, actor=actor, source=source)
    if changes.is_global is not None and changes.is_global != (source.tenant_id is None):
        raise InvalidSource("a source cannot move between global and tenant scope; create a new one",
                            details={"field": "is_global"})
    source = MarketSource.objects.select_for_update().get(pk=source.pk)
    _apply(source, changes)
    source.save()
    return selectors.source_get(tenant=tenant, source_id=source.pk)


@transaction.atomic
def source_delete(*, tenant: Tenant | None, actor: Any, source_id: Any) -> None:
    """Delete a source and its entries; tools loaded from them keep working, unlinked from the market."""
    source = selectors.source_get(tenant=tenant, source_id=source_id)
    ensure_can_manage(tenant=tenant, actor=actor, source=source)
    MarketSource.objects.filter(pk=source.pk).delete()
