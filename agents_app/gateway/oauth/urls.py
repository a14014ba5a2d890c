"""Where the authorization server lives: the discovery documents at the site root (`well_known`), the endpoints
under /oauth/ in django-oauth-toolkit's `oauth2_provider` namespace (`urlpatterns`)."""

from __future__ import annotations

from django.urls import URLPattern, path, re_path
from oauth2_provider import views as dot

from agents_app.gateway.oauth import metadata
from agents_app.gateway.oauth.consent import ConsentView
from agents_app.gateway.oauth.cors import open_to_browsers
from agents_app.gateway.oauth.mine import my_authorizations
from agents_app.gateway.oauth.registration import PublicClientManagementView, PublicClientRegistrationView

app_name = "oauth2_provider"

_AGENT = r"mcp/(?P<tenant>[a-z0-9][a-z0-9-]{0,63})/agents/(?P<agent_id>[0-9]{1,18})"

well_known: list[URLPattern] = [
    # The /sse variant shares its agent's resource (and so its tokens).
    re_path(rf"^\.well-known/oauth-protected-resource/{_AGENT}(?:/sse)?/?$",
            open_to_browsers(metadata.protected_resource), name="gateway-resource-metadata"),
    path(".well-known/oauth-authorization-server", open_to_browsers(metadata.authorization_server),
         name="gateway-authorization-server"),
    path(".well-known/oauth-authorization-server/<path:issuer_path>", open_to_browsers(metadata.authorization_server),
         name="gateway-authorization-server-path"),
]

urlpatterns: list[URLPattern] = [
    path("authorize/", ConsentView.as_view(), name="authorize"),
    path("token/", open_to_browsers(dot.TokenView.as_view()), name="token"),
    path("revoke/", open_to_browsers(dot.RevokeTokenView.as_view()), name="revoke-token"),
    path("register/", open_to_browsers(PublicClientRegistrationView.as_view()), name="dcr-register"),
    path("authorizations/", my_authorizations, name="my-authorizations"),
    path("register/<str:client_id>/", PublicClientManagementView.as_view(),
         name="dcr-register-management"),
]
