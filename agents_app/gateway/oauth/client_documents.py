"""Client ID Metadata Documents (MCP 2025-11-25): a client whose id is an https URL is described by the JSON
document at that URL. django-oauth-toolkit resolves them; the fetch goes through Toolhub's one outbound guard
(core.outbound: resolved addresses, size, time, no redirects) and the document's redirect URIs follow the same
rules as a registration's."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from oauth2_provider.cimd import CIMDError, _effective_max_age, _validate_client_id_url
from oauth2_provider.settings import oauth2_settings

from agents_app.gateway.oauth.registration import redirect_uri_problem
from core.errors import DomainError
from core.outbound import OutboundPolicy, fetch


class GuardedMetadataFetcher:
    """django-oauth-toolkit's CIMD_METADATA_FETCHER: `fetch(client_id)` -> (document, max age in seconds)."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        _validate_client_id_url(client_id)
        policy = OutboundPolicy.build(settings.TOOLHUB_OUTBOUND_ALLOW, max_redirects=0,
                                      max_bytes=int(oauth2_settings.CIMD_MAX_DOCUMENT_SIZE),
                                      timeout_s=float(oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS))
        try:
            response = fetch("GET", client_id, policy=policy, headers={"Accept": "application/json"})
        except DomainError as exc:
            raise CIMDError(f"client_id document could not be fetched: {exc.code}") from None
        if response.status != 200:
            raise CIMDError(f"client_id document answered HTTP {response.status}")
        media = response.content_type
        if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
            raise CIMDError("client_id document is not JSON")
        try:
            document = json.loads(response.content)
        except ValueError:
            raise CIMDError("client_id document is not valid JSON") from None
        if not isinstance(document, dict):
            raise CIMDError("client_id document must be a JSON object")
        uris = document.get("redirect_uris")
        if not isinstance(uris, list) or not uris:
            raise CIMDError("client_id document lists no redirect_uris")
        for uri in uris:
            if (problem := redirect_uri_problem(uri)) is not None:
                raise CIMDError(problem)
        return document, int(_effective_max_age(response.headers.get("cache-control")))
