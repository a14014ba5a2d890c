"""Routes of the chat playground page."""

from django.urls import path

from agents_app.views import playground

urlpatterns = [path("", playground, name="playground")]
