"""The SCIM routes (/scim/v2/): each hands its request to its view in identity_app.scim.views, imported at the first
SCIM request rather than when the URL conf loads.

scim2-models builds some fifty pydantic models at import, each reading its attributes' docstrings from the source
(about 0.6 s of CPU). The URL conf is loaded by every web process and by the system checks of every management
command (a runner's start, `check`, `migrate`), most of which never serve a SCIM request.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.views.decorators.csrf import csrf_exempt


def _deferred(name: str) -> Any:
    @csrf_exempt
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        from identity_app.scim import views  # at the first SCIM request (see the module's docstring)

        return views.VIEWS[name](request, *args, **kwargs)

    view.__name__ = view.__qualname__ = f"scim_{name}"
    return view


urlpatterns: list[URLPattern] = [
    path("ServiceProviderConfig", _deferred("service_provider_config")),
    path("ResourceTypes", _deferred("resource_types")),
    path("ResourceTypes/<str:ident>", _deferred("resource_types")),
    path("Schemas", _deferred("schemas")),
    path("Schemas/<str:ident>", _deferred("schemas")),
    path(".search", _deferred("search")),
    path("Users/.search", _deferred("users_search")),
    path("Groups/.search", _deferred("groups_search")),
    path("Users", _deferred("users")),
    path("Users/<str:ident>", _deferred("user")),
    path("Groups", _deferred("groups")),
    path("Groups/<str:ident>", _deferred("group")),
    path("<path:rest>", _deferred("unknown")),
]
