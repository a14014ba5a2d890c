"""Demo routes (mounted at /market/ when TOOLHUB_DEMO_ENABLED; production never serves them)."""

from django.urls import path

from toolhub_demo.views import demo_catalog

urlpatterns = [path("demo-catalog.json", demo_catalog, name="market-demo-catalog")]
