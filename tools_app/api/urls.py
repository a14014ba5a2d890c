"""Routes of the tools API."""

from rest_framework.routers import SimpleRouter

from tools_app.api.quotas import QuotaViewSet, UsageViewSet
from tools_app.api.views import ApprovalViewSet, ToolCallViewSet, ToolViewSet

router = SimpleRouter()
router.register("tools", ToolViewSet, basename="tool")
router.register("tool-calls", ToolCallViewSet, basename="tool-call")
router.register("approvals", ApprovalViewSet, basename="approval")
router.register("quotas", QuotaViewSet, basename="quota")
router.register("usage", UsageViewSet, basename="usage")
urlpatterns = router.urls
