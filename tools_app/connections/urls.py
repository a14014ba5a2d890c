"""The routes of a member's connections, all from `paths` (one include in config/urls.py, at the site root).

Served here: the member page and the callback under `/connections/`; the connect link where the API contract puts
it (`/oauth/start/<flow>/`). Kept because upstream servers or old links know them: the registered redirect URI forwards permanently (308: the
method, and the provider's `code` and `state` in the query, go along); the client metadata document is served at
its own URL (the client id); the member page's old home forwards too.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseRedirectBase
from django.urls import URLPattern, path, reverse

from tools_app.connections import oauth_views, paths, views


class _PermanentRedirect(HttpResponseRedirectBase):
    """308: the browser repeats the same request (method, body) at the new URL, for good."""

    status_code = 308


def moved(to: str) -> Any:
    """A view forwarding for good to the route named `to` (with the same URL arguments), the query kept."""

    def forward(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        target = reverse(to, kwargs=kwargs or None)
        query = request.META.get("QUERY_STRING", "")
        return _PermanentRedirect(f"{target}?{query}" if query else target)

    forward.__name__ = f"moved_to_{to.replace('-', '_')}"
    return forward


def _route(site_path: str) -> str:
    return site_path.removeprefix("/").replace("{flow}", "<uuid:flow>")


urlpatterns: list[URLPattern] = [
    path(_route(paths.HOME_PATH), views.connections, name="my-connections"),
    path(_route(paths.START_PATH), oauth_views.start, name="oauth-start"),
    path(_route(paths.CALLBACK_PATH), oauth_views.callback, name="oauth-callback"),
    # Known upstream: never moved.
    path(_route(paths.REGISTERED_REDIRECT_PATH), moved("oauth-callback"), name="oauth-registered-callback"),
    path(_route(paths.CLIENT_METADATA_PATH), oauth_views.client_metadata, name="oauth-client-metadata"),
    # Old homes.
    path(_route(paths.MOVED_HOME_PATH), moved("my-connections"), name="my-connections-moved"),
]
