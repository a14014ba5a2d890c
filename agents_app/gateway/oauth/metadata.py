"""The discovery documents: each agent's protected resource metadata (RFC 9728) and Toolhub's authorization
server metadata (RFC 8414), both built on the public base so the issuer a client checks is the one it reached."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from agents_app.gateway.resource import SCOPE, agent_resource
from core.links import public_base, public_url


def _public(data: dict[str, object]) -> JsonResponse:
    response = JsonResponse(data)
    # Browser-based clients (the MCP Inspector) read these documents cross-origin; they carry nothing private.
    response["Access-Control-Allow-Origin"] = "*"
    response["Cache-Control"] = "public, max-age=300"
    return response


def issuer(request: HttpRequest) -> str:
    """Toolhub's issuer identifier: the public base (TOOLHUB_PUBLIC_URL, else the request's origin)."""
    return public_base(request)


@require_GET
def protected_resource(request: HttpRequest, tenant: str, agent_id: int) -> HttpResponse:
    """RFC 9728 for one agent's gateway URL. Answered from the path alone, so it says nothing about whether the
    tenant or the agent exists (the gateway's 404 is the same for both)."""
    return _public({
        "resource": agent_resource(public_base(request), tenant, agent_id),
        "authorization_servers": [issuer(request)],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "Toolhub agent",
    })


@require_GET
def authorization_server(request: HttpRequest, issuer_path: str = "") -> HttpResponse:
    """RFC 8414; also at the path-insertion form (`/.well-known/oauth-authorization-server/<issuer path>`) when
    the issuer has a path. Only what Toolhub accepts is advertised: code + PKCE S256, public clients."""
    # At the root too when the issuer has a path: a proxy that serves Toolhub under that path strips it.
    if issuer_path.strip("/") not in ("", urlsplit(issuer(request)).path.strip("/")):
        return JsonResponse({"error": "not_found"}, status=404)
    return _public({
        "issuer": issuer(request),
        "authorization_endpoint": public_url(reverse("oauth2_provider:authorize"), request=request),
        "token_endpoint": public_url(reverse("oauth2_provider:token"), request=request),
        "registration_endpoint": public_url(reverse("oauth2_provider:dcr-register"), request=request),
        "revocation_endpoint": public_url(reverse("oauth2_provider:revoke-token"), request=request),
        "scopes_supported": [SCOPE],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    })
