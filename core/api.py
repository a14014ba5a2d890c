"""The tenant-scoped viewset base every API view derives from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from django.conf import settings
from django.db.models import Model, QuerySet
from django.http import Http404
from django.utils.module_loading import import_string
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework import status as http
from rest_framework.request import Request
from rest_framework.response import Response

from core import hotcache
from core.errors import NotFound
from core.roles import Role
from core.throttle import counted_ahead


def _resolver() -> Callable[[Any, str | None, Role], tuple[Any, Any]]:
    # The tenancy app plugs in through a setting: core sits below every app and imports none of them. It resolves
    # the tenant and checks the caller's role there (the role policy, tenants_app.policies).
    resolver: Callable[[Any, str | None, Role], tuple[Any, Any]] = import_string(settings.TOOLHUB_TENANT_RESOLVER)
    return resolver


def _likely_user_pk(request: Request) -> Any:
    """The user this request's credentials named last time in this process, if an authenticator can tell
    without a round trip (tenants_app.auth_cache); a guess the throttle only acts on when authentication agrees."""
    for authenticator in request.authenticators or ():
        guess = getattr(authenticator, "likely_user_pk", None)
        found = guess(request) if guess is not None else None
        if found is not None:
            return found
    return None


class TenantViewSet(viewsets.GenericViewSet[Any]):
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
        # A throttled action's count rides in that round trip too (core.throttle.counted_ahead).
        with counted_ahead(self, self.get_throttles(), lambda: _likely_user_pk(request)):
            super().initial(request, *args, **kwargs)
        # The role policy (tenants_app.policies), as services apply it: an operator passes as owner.
        tenant, membership = _resolver()(request.user, request.headers.get("X-Tenant"), self.required_role(request))
        # On the Django request too: DRF's OPTIONS metadata clones the request (clone_request keeps only the
        # HttpRequest underneath) and looks the object up through that clone.
        request.tenant = request._request.tenant = tenant  # type: ignore[attr-defined]
        request.membership = request._request.membership = membership  # type: ignore[attr-defined]

    @property
    def tenant(self) -> Any:
        """The request's tenant, resolved and role-checked in `initial` (a tenants_app.models.Tenant)."""
        return self.request.tenant  # type: ignore[attr-defined]

    @property
    def membership(self) -> Any:
        """The caller's membership of `tenant` (tenants_app.resolution), with its role."""
        return self.request.membership  # type: ignore[attr-defined]

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):
            # Schema generation has no tenant: an empty queryset of the output model types the path ids.
            model = getattr(getattr(self.get_serializer_class(), "Meta", None), "model", None)
            if model is not None:
                empty: QuerySet[Any] = model._default_manager.none()
                return empty
        scoped: QuerySet[Any] = self.scoped_queryset(tenant=self.tenant, user=self.request.user)
        return scoped

    def get_object(self) -> Model:
        """Detail objects come through the scoped queryset too: another tenant's object is NotFound."""
        try:
            found: Model = super().get_object()
        except (Http404, ValueError, TypeError, OverflowError):
            raise NotFound() from None
        return found


class ServiceCrudViewSet(TenantViewSet):
    """The CRUD scaffold every resource shares: list, retrieve, create, update (PUT and PATCH) and destroy, each
    a thin call of the resource's selector or service (HackSoft's input/output serializers).

    A subclass names its serializers (`input_serializer`; `serializer_class` for output; `list_serializer` when
    the list shows less) and implements `get_one(pk)` (a tenant-scoped selector) and the three `do_*` service
    calls. The OpenAPI schema of the six operations is derived from those serializers at class creation.
    """

    input_serializer: ClassVar[type[serializers.Serializer[Any]] | None] = None
    list_serializer: ClassVar[type[serializers.Serializer[Any]] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        inp, out = cls.input_serializer, getattr(cls, "serializer_class", None)
        if inp is None or out is None:
            return
        listed = cls.list_serializer or out
        extend_schema_view(
            list=extend_schema(responses=listed(many=True)),
            retrieve=extend_schema(responses=out),
            create=extend_schema(request=inp, responses={201: out}),
            update=extend_schema(request=inp, responses=out),
            partial_update=extend_schema(request=inp, responses=out),
            destroy=extend_schema(responses={204: None}),
        )(cls)

    # --- what a resource provides ---
    def get_one(self, pk: Any) -> Any:
        raise NotImplementedError

    def do_create(self, data: Any) -> Any:
        raise NotImplementedError

    def do_update(self, pk: Any, changes: Any) -> Any:
        raise NotImplementedError

    def do_delete(self, pk: Any) -> None:
        raise NotImplementedError

    # --- the scaffold ---
    def _out(self, obj: Any) -> dict[str, Any]:
        return dict(self.get_serializer_class()(obj).data)

    def _valid_input(self, request: Request, *, partial: bool) -> Any:
        assert self.input_serializer is not None
        body = self.input_serializer(data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        return body.to_input()  # type: ignore[attr-defined]

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        listed = self.list_serializer or self.get_serializer_class()
        return self.get_paginated_response(listed(page, many=True).data)

    def retrieve(self, request: Request, pk: Any = None) -> Response:
        return Response(self._out(self.get_one(pk)))

    def create(self, request: Request) -> Response:
        created = self.do_create(self._valid_input(request, partial=False))
        return Response(self._out(created), status=http.HTTP_201_CREATED)

    def update(self, request: Request, pk: Any = None) -> Response:
        return Response(self._out(self.do_update(pk, self._valid_input(request, partial=False))))

    def partial_update(self, request: Request, pk: Any = None) -> Response:
        return Response(self._out(self.do_update(pk, self._valid_input(request, partial=True))))

    def destroy(self, request: Request, pk: Any = None) -> Response:
        self.do_delete(pk)
        return Response(status=http.HTTP_204_NO_CONTENT)
