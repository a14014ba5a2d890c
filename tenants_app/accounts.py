"""Member sign-in and sign-out: Django's auth views in the admin's frame, for every member, staff or not."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy


class MemberLoginView(auth_views.LoginView):
    """The admin's look (header, styles) without its staff check; a signed-in visitor goes straight on."""

    template_name = "registration/member_login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(admin.site.each_context(self.request))
        context.update(title="Sign in", app_path=self.request.get_full_path())
        return context


urlpatterns = [
    path("login/", MemberLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page=reverse_lazy("login")), name="logout"),
]
