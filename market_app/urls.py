"""Non-API routes of the market (mounted at /market/)."""

from django.urls import path

from market_app.views import demo_catalog

urlpatterns = [path("demo-catalog.json", demo_catalog, name="market-demo-catalog")]
