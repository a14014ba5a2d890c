"""Routes of the identity API (/api/v1/identity-providers/, /api/v1/scim-tokens/)."""

from rest_framework.routers import SimpleRouter

from identity_app.api.views import IdentityProviderViewSet, ScimTokenViewSet

router = SimpleRouter()
router.register("identity-providers", IdentityProviderViewSet, basename="identity-provider")
router.register("scim-tokens", ScimTokenViewSet, basename="scim-token")
urlpatterns = router.urls
