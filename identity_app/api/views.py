"""Identity API: the tenant's OpenID Connect providers and SCIM tokens (owners and admins)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status as http
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ServiceCrudViewSet, TenantViewSet
from core.roles import Role
from identity_app import selectors, services
from identity_app.api import serializers as s


class IdentityProviderViewSet(ServiceCrudViewSet):
    """Company sign-in providers; the client secret is write-only, `redirect_uri` is what to register there."""

    serializer_class = s.ProviderOut
    input_serializer = s.ProviderIn
    read_role = Role.ADMIN
    write_role = Role.ADMIN

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.provider_list(tenant=tenant)

    def get_one(self, pk: Any) -> Any:
        return selectors.provider_get(tenant=self.tenant, provider_id=pk)

    def do_create(self, data: Any) -> Any:
        return services.provider_create(tenant=self.tenant, actor=self.request.user, data=data)

    def do_update(self, pk: Any, changes: Any) -> Any:
        return services.provider_update(tenant=self.tenant, actor=self.request.user, provider_id=pk, changes=changes)

    def do_delete(self, pk: Any) -> None:
        services.provider_delete(tenant=self.tenant, actor=self.request.user, provider_id=pk)


class ScimTokenViewSet(TenantViewSet):
    """SCIM bearer tokens: created (the token shown once), listed without it, deleted."""

    serializer_class = s.ScimTokenOut
    read_role = Role.ADMIN
    write_role = Role.ADMIN

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.scim_token_list(tenant=tenant)

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.ScimTokenOut(page, many=True).data)

    @extend_schema(request=None, responses={201: s.ScimTokenCreatedOut})
    def create(self, request: Request) -> Response:
        row, token = services.scim_token_create(tenant=self.tenant, actor=request.user)
        return Response({"id": row.pk, "token": token}, status=http.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: Any = None) -> Response:
        services.scim_token_delete(tenant=self.tenant, actor=request.user, token_id=pk)
        return Response(status=http.HTTP_204_NO_CONTENT)
