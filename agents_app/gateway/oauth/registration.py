"""Dynamic Client Registration (RFC 7591) for public clients: django-oauth-toolkit's endpoint behind Toolhub's
rules for the metadata: the authorization code grant only, no client secret (the method is replaced by `none`,
as RFC 7591 allows), and redirect URIs that are https, or http on a loopback address for desktop clients."""

from __future__ import annotations

import ipaddress
import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.views import DynamicClientRegistrationManagementView, DynamicClientRegistrationView

MAX_REDIRECT_URIS = 10
MAX_NAME = 100
MAX_BODY = 16 * 1024
_GRANTS = {"authorization_code", "refresh_token"}


def _refused(description: str) -> JsonResponse:
    return JsonResponse({"error": "invalid_client_metadata", "error_description": description}, status=400)


def _over_rate(request: HttpRequest) -> bool:
    """Registration is open to anyone: each address may register TOOLHUB_OAUTH_REGISTRATIONS_PER_HOUR clients an
    hour (counted in the shared cache), so nobody fills the database with clients."""
    limit = int(settings.TOOLHUB_OAUTH_REGISTRATIONS_PER_HOUR)
    if limit <= 0:
        return False
    key = f"toolhub:oauth-dcr:{request.META.get('REMOTE_ADDR', '')}"
    cache.add(key, 0, timeout=3600)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=3600)
        count = 1
    return count > limit


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: Any) -> str | None:
    """Why a redirect URI cannot be registered, else None."""
    if not isinstance(uri, str) or len(uri) > 2000:
        return "each redirect_uri must be a string of at most 2000 characters"
    parts = urlsplit(uri)
    if parts.fragment or "#" in uri:
        return "a redirect_uri may not have a fragment"
    if not parts.hostname or parts.username or parts.password:
        return "a redirect_uri must be an absolute URL with a host and no credentials"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http" and _loopback(parts.hostname):
        return None
    return "a redirect_uri must be https, or http on a loopback address (127.0.0.1, [::1], localhost)"


def checked_metadata(data: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The client metadata as Toolhub registers it, or why it cannot be."""
    if not isinstance(data, dict):
        return None, "the body must be a JSON object"
    uris = data.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        return None, f"redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs"
    for uri in uris:
        if (problem := redirect_uri_problem(uri)) is not None:
            return None, problem
    grants = data.get("grant_types", ["authorization_code"])
    if not isinstance(grants, list) or "authorization_code" not in grants or not set(grants) <= _GRANTS:
        return None, "grant_types must be authorization_code (with refresh_token)"
    responses = data.get("response_types", ["code"]) or ["code"]
    if not isinstance(responses, list) or not set(responses) <= {"code"}:
        return None, "response_types must be code"
    name = data.get("client_name", "")
    if not isinstance(name, str):
        return None, "client_name must be a string"
    return {
        "redirect_uris": uris,
        "client_name": " ".join(name.split())[:MAX_NAME] or "Unnamed MCP client",
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    }, None


def _checked_body(request: HttpRequest) -> HttpResponse | None:
    """Replace the body by the checked metadata (django-oauth-toolkit registers what it reads from the body);
    the refusal when it cannot be registered."""
    if len(request.body) > MAX_BODY:
        return _refused("the registration request is too large")
    try:
        data = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return _refused("the body must be JSON")
    metadata, problem = checked_metadata(data)
    if metadata is None:
        return _refused(problem or "invalid client metadata")
    request._body = json.dumps(metadata).encode()
    return None


@method_decorator(csrf_exempt, name="dispatch")
class PublicClientRegistrationView(DynamicClientRegistrationView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if _over_rate(request):
            refused = JsonResponse({"error": "too_many_requests",
                                    "error_description": "too many client registrations from this address"}, status=429)
            refused["Retry-After"] = "3600"
            return refused
        return _checked_body(request) or super().post(request, *args, **kwargs)


@method_decorator(csrf_exempt, name="dispatch")
class PublicClientManagementView(DynamicClientRegistrationManagementView):
    """RFC 7592 (read, update, delete with the registration access token): an update obeys registration's rules."""

    def put(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return _checked_body(request) or super().put(request, *args, **kwargs)
