"""Routes of the market API."""

from rest_framework.routers import SimpleRouter

from market_app.api.views import EntryViewSet, SourceViewSet

router = SimpleRouter()
router.register("sources", SourceViewSet, basename="market-source")
router.register("entries", EntryViewSet, basename="market-entry")
urlpatterns = router.urls
