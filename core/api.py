"""The tenant-scoped viewset base every API view derives from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from django.conf import settings
from django.db.models import Model, QuerySet
from django.http import Http404
from django.utils.module_loading import import_string
from rest_framework import viewsets
from rest_framework.request import Request

from core import hotcache
from core.errors import NotFound
from core.roles import Role


def _resolver() -> Callable[[Any, str | None], tuple[Any, Any]]:
    # The tenancy app plugs in through a setting: core sits below every app and imports none of them.
    return import_string(settings.TOOLHUB_TENANT_RESOLVER)  # type: ignore[no-any-return]


class TenantViewSet(viewsets.GenericViewSet):
    """Every API view's base: the tenant comes from X-Tenant and the queryset from a tenant-first selector.

    Subclasses define `scoped_queryset(*, tenant, user)`; defining `get_queryset` is refused at import.
    Roles are declared, never computed per request: `read_role` / `write_role` set the minimum membership
    role for safe and unsafe methods, and `action_roles` overrides them for named actions
    (`{"invoke": Role.MEMBER}`). Overriding `initial`, `check_permissions` or `get_permissions` is refused
    at import, so no view can bypass or mutate the check.
    """

    # Ids are integers: a detail route never swallows a word (`/tools/all/`, `/tools/options/`), and a
    # non-numeric id is the router's 404 rather than a lookup.
    lookup_value_regex = r"[0-9]+"
    read_role: ClassVar[Role] = Role.VIEWER
    write_role: ClassVar[Role] = Role.ADMIN
    action_roles: ClassVar[Mapping[str, Role]] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "get_queryset" in cls.__dict__ or "queryset" in cls.__dict__:
            raise TypeError(f"{cls.__name__}: define scoped_queryset(*, tenant, user), not get_queryset")
        for name in ("initial", "check_permissions", "get_permissions", "permission_classes", "get_object"):
            if name in cls.__dict__:
                raise TypeError(f"{cls.__name__}: declare read_role/write_role/action_roles instead of {name}")
        cls.action_roles = MappingProxyType(dict(cls.action_roles))  # read-only: no view mutates its roles

    def required_role(self, request: Request) -> Role:
        """The declared role for this action, else the read or write role of the method."""
        role = self.action_roles.get(self.action or "")
        if role is not None:
            return role
        return self.read_role if request.method in ("GET", "HEAD", "OPTIONS") else self.write_role

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        hotcache.hint_tenant(request.headers.get("X-Tenant"))  # its generation comes with the identity one
        super().initial(request, *args, **kwargs)
        tenant, membership = _resolver()(request.user, request.headers.get("X-Tenant"))
        # On the Django request too: DRF's OPTIONS metadata clones the request (clone_request keeps only the
        # HttpRequest underneath) and looks the object up through that clone.
        request.tenant = request._request.tenant = tenant  # type: ignore[attr-defined]
        request.membership = request._request.membership = membership  # type: ignore[attr-defined]
        # The role policy (tenants_app.policies), as services apply it: an operator passes as owner.
        membership.require(self.required_role(request), user=request.user)

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):
            # Schema generation has no tenant: an empty queryset of the output model types the path ids.
            model = getattr(getattr(self.get_serializer_class(), "Meta", None), "model", None)
            if model is not None:
                return model._default_manager.none()
        return self.scoped_queryset(tenant=self.request.tenant, user=self.request.user)  # type: ignore[attr-defined]

    def get_object(self) -> Model:
        """Detail objects come through the scoped queryset too: another tenant's object is NotFound."""
        try:
            return super().get_object()
        except (Http404, ValueError, TypeError, OverflowError):
            raise NotFound() from None
