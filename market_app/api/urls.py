"""Routes of the market API."""

from rest_framework.routers import SimpleRouter

from market_app.api.views import EntryViewSet, SourceViewSet, ToolMarketUpdateViewSet

router = SimpleRouter()
router.register("sources", SourceViewSet, basename="market-source")
router.register("entries", EntryViewSet, basename="market-entry")
urlpatterns = router.urls

# Mounted beside the tools routes (/api/v1/tools/{id}/market-update/): the market acts on a tool, so the
# route lives here and the tools app stays free of market imports.
tool_router = SimpleRouter()
tool_router.register("tools", ToolMarketUpdateViewSet, basename="tool-market")
tool_urlpatterns = tool_router.urls
