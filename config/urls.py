"""URL configuration: admin, API v1, schema and docs."""

from django.conf import settings
from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from agents_app.gateway.oauth import urls as gateway_oauth_urls
from core.api_root import ApiRootView
from core.health import healthz
from core.metrics import metrics_view
from market_app.api import urls as market_api_urls

api_root = ApiRootView.as_view(
    entry_points={
        "tools": "tool-list", "tool_calls": "tool-call-list", "approvals": "approval-list",
        "models": "chat-model-list", "agents": "agent-list", "conversations": "conversation-list",
        "intents": "intent-list", "market_sources": "market-source-list", "market_entries": "market-entry-list",
        "identity_providers": "identity-provider-list", "scim_tokens": "scim-token-list",
    },
    docs={"schema": "schema", "swagger_ui": "docs", "redoc": "redoc"},
)

api_v1: list[URLPattern | URLResolver] = [
    path("", api_root, name="api-root"),
    path("", include("tools_app.api.urls")),
    path("", include(market_api_urls.tool_urlpatterns)),
    path("", include("agents_app.api.urls")),
    path("market/", include("market_app.api.urls")),
    path("", include("identity_app.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="schema", template_name="drf_spectacular/redoc_local.html"), name="redoc"),
]
# Unknown /api/ paths get the JSON error envelope (handler404); other paths keep Django's 404 page.
handler404 = "core.api_root.not_found"

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False), name="root"),
    path("admin/", admin.site.urls),
    # A member's connections (Toolhub signing in upstream): /connections/, plus the URLs upstream servers
    # registered (/oauth/callback/, /oauth/client-metadata.json) and the old homes, forwarded (tools_app.connections).
    path("", include("tools_app.connections.urls")),
    path("accounts/sso/", include("identity_app.views")),
    path("accounts/", include("tenants_app.accounts")),
    # Toolhub as the gateway's OAuth authorization server (agents_app.gateway.oauth), and its discovery documents.
    path("oauth/", include(gateway_oauth_urls)),
    path("", include(gateway_oauth_urls.well_known)),
    path("metrics", metrics_view, name="metrics"),
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include(api_v1)),
    path("scim/v2/", include("identity_app.scim.urls")),
    path("playground/", include("agents_app.urls")),
]
if settings.TOOLHUB_DEMO_ENABLED:
    urlpatterns.append(path("market/", include("toolhub_demo.urls")))
