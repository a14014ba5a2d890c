"""Quotas API (owners and admins) and the usage report: thin views over tools_app.services.quotas and usage."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ServiceCrudViewSet, TenantViewSet
from tenants_app.models import Role
from tools_app import selectors, usage
from tools_app.models import Quota
from tools_app.services import quotas


class QuotaIn(serializers.Serializer[Any]):
    # Plain fields: the service names what is wrong (an unknown scope, a negative limit) with its own typed error.
    scope = serializers.CharField(required=False, help_text="tenant | member | agent | tool")
    target = serializers.CharField(required=False, allow_blank=True, allow_null=True,
                                   help_text="the member's username, the agent or tool id; empty for the tenant "
                                             "(for the other scopes: the default of each member, agent or tool)")
    per_minute = serializers.JSONField(required=False, allow_null=True, help_text="calls per UTC minute; null: no limit")
    per_day = serializers.JSONField(required=False, allow_null=True, help_text="calls per UTC day; null: no limit")
    concurrent = serializers.JSONField(required=False, allow_null=True, help_text="calls at once; null: no limit")

    def to_input(self) -> quotas.QuotaInput:
        data = self.validated_data
        return quotas.QuotaInput(**{name: data[name] for name in
                                    ("scope", "target", "per_minute", "per_day", "concurrent") if name in data})


class QuotaOut(serializers.ModelSerializer[Quota]):
    class Meta:
        model = Quota
        fields = ["id", "scope", "target", "per_minute", "per_day", "concurrent", "created_at", "updated_at"]


class QuotaViewSet(ServiceCrudViewSet):
    """Calls per minute, per day and at once, for the tenant, a member, an agent or a tool."""

    read_role = Role.ADMIN
    write_role = Role.ADMIN
    serializer_class = QuotaOut
    input_serializer = QuotaIn
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.quota_list(tenant=tenant)

    def get_one(self, pk: Any) -> Any:
        return selectors.quota_get(tenant=self.tenant, quota_id=pk)

    def do_create(self, data: Any) -> Any:
        return quotas.quota_create(tenant=self.tenant, actor=self.request.user, data=data)

    def do_update(self, pk: Any, changes: Any) -> Any:
        return quotas.quota_update(tenant=self.tenant, actor=self.request.user, quota_id=pk, changes=changes)

    def do_delete(self, pk: Any) -> None:
        quotas.quota_delete(tenant=self.tenant, actor=self.request.user, quota_id=pk)


class UsageToolOut(serializers.Serializer[Any]):
    tool = serializers.IntegerField(allow_null=True, help_text="the tool's id (null: deleted since)")
    name = serializers.CharField()
    calls = serializers.IntegerField()
    # A declared field (DRF's metaclass moves it out of the class attributes), so Serializer.errors is untouched.
    errors = serializers.DictField(child=serializers.IntegerField(),  # type: ignore[assignment]
                                   help_text="error code -> calls")
    p50_ms = serializers.IntegerField(allow_null=True)
    p95_ms = serializers.IntegerField(allow_null=True)
    quota_refusals = serializers.IntegerField()


@extend_schema_serializer(many=False)  # the list action answers one report, not a list
class UsageOut(serializers.Serializer[Any]):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    tools = UsageToolOut(many=True)


class UsageViewSet(TenantViewSet):
    """Per tool: calls, errors by code, latency percentiles and quota refusals, from the audit (admins)."""

    read_role = Role.ADMIN
    pagination_class = None  # one report, not a page of rows

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.tool_call_list(tenant=tenant)

    @extend_schema(parameters=[OpenApiParameter("since", str, description="ISO 8601 time (default: 24 hours ago)"),
                               OpenApiParameter("until", str, description="ISO 8601 time (default: now)")],
                   responses=UsageOut)
    def list(self, request: Request) -> Response:
        since, until = usage.window(request.query_params.get("since"), request.query_params.get("until"))
        return Response({"since": since.isoformat(), "until": until.isoformat(),
                         "tools": usage.tool_usage(tenant=self.tenant, since=since, until=until)})
