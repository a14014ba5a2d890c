"""URL configuration: admin, API v1, schema and docs."""

from django.conf import settings
from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.health import healthz
from core.metrics import metrics_view
from market_app.api import urls as market_api_urls

api_v1: list[URLPattern | URLResolver] = [
    path("", include("tools_app.api.urls")),
    path("", include(market_api_urls.tool_urlpatterns)),
    path("", include("agents_app.api.urls")),
    path("market/", include("market_app.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
]
# Unknown /api/ paths get the JSON error envelope (handler404); other paths keep Django's 404 page.
handler404 = "core.api_root.not_found"

admin.site.site_header = "Toolhub administration"
admin.site.site_title = "Toolhub"
admin.site.index_title = "Tools, agents and the market"

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False), name="root"),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include(api_v1)),
    path("playground/", include("agents_app.urls")),
]
if settings.TOOLHUB_DEMO_ENABLED:
    urlpatterns.append(path("market/", include("toolhub_demo.urls")))
