"""Market API: thin views over market_app.services and market_app.selectors."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework import status as http
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ServiceCrudViewSet, TenantViewSet
from market_app import selectors, services
from market_app.api import serializers as s
from tools_app import selectors as tool_selectors
from tools_app.api.serializers import ToolOut

LoadOut = inline_serializer("MarketLoadOut", {"tool": ToolOut(), "message": serializers.CharField()})


class SourceViewSet(ServiceCrudViewSet):
    """Catalog sources: the global ones and the tenant's own; auth headers are write-only."""

    serializer_class = s.SourceOut
    input_serializer = s.SourceIn

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.source_list(tenant=tenant)

    def get_one(self, pk: Any) -> Any:
        return selectors.source_get(tenant=self.tenant, source_id=pk)

    def do_create(self, data: Any) -> Any:
        return services.source_create(tenant=self.tenant, actor=self.request.user, data=data)

    def do_update(self, pk: Any, changes: Any) -> Any:
        return services.source_update(tenant=self.tenant, actor=self.request.user, source_id=pk, changes=changes)

    def do_delete(self, pk: Any) -> None:
        services.source_delete(tenant=self.tenant, actor=self.request.user, source_id=pk)

    @extend_schema(request=None, responses=s.RefreshOut)
    @action(detail=True, methods=["post"], url_path="refresh")
    def refresh(self, request: Request, pk: Any = None) -> Response:
        """Refresh now, in this request (the schedule uses the Celery task)."""
        counts = services.source_refresh(source_id=pk, tenant=self.tenant, actor=request.user)
        return Response(counts)


ENTRY_FILTERS = [
    OpenApiParameter("source", int, description="source id"),
    OpenApiParameter("q", str, description="substring of name, title or description"),
    OpenApiParameter("kind", str, enum=["LOCAL", "REMOTE"]),
    OpenApiParameter("status", str, enum=["active", "deprecated", "removed", "all"],
                     description="default: every status but removed"),
]


class EntryViewSet(TenantViewSet):
    """Entries of the visible sources; members read, admins load."""

    serializer_class = s.EntryOut

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.entry_list(tenant=tenant, filters=selectors.EntryFilters.from_query(self.request.query_params))

    @extend_schema(parameters=ENTRY_FILTERS, responses=s.EntryOut(many=True))
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.EntryOut(page, many=True, context={"request": request}).data)

    def retrieve(self, request: Request, pk: Any = None) -> Response:
        entry = selectors.entry_get(tenant=self.tenant, entry_id=pk)
        return Response(s.EntryOut(entry, context={"request": request}).data)

    @extend_schema(request=s.LoadIn, responses={201: LoadOut})
    @action(detail=True, methods=["post"], url_path="load")
    def load(self, request: Request, pk: Any = None) -> Response:
        body = s.LoadIn(data=request.data)
        body.is_valid(raise_exception=True)
        loaded = services.entry_load(
            tenant=self.tenant, actor=request.user, entry_id=pk, **body.validated_data
        )
        return Response({"tool": ToolOut(loaded.tool).data, "message": loaded.message}, status=http.HTTP_201_CREATED)

    @extend_schema(request=s.BatchLoadIn, responses=inline_serializer(
        "MarketBatchLoadOut", {"results": s.BatchResultOut(many=True)}))
    @action(detail=False, methods=["post"], url_path="batch-load")
    def batch_load(self, request: Request) -> Response:
        body = s.BatchLoadIn(data=request.data)
        body.is_valid(raise_exception=True)
        results = services.entries_batch_load(
            tenant=self.tenant, actor=request.user, ids=body.validated_data["ids"]
        )
        return Response({"results": results})


class ToolMarketUpdateViewSet(TenantViewSet):
    """`POST /tools/{id}/market-update/`: the market's own route on a tool (tools import nothing of the market)."""

    serializer_class = ToolOut

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return tool_selectors.tool_list(tenant=tenant)

    @extend_schema(request=s.MarketUpdateIn, responses=ToolOut)
    @action(detail=True, methods=["post"], url_path="market-update")
    def market_update(self, request: Request, pk: Any = None) -> Response:
        """Apply the newer market entry, keeping the stored values of variables it still declares."""
        body = s.MarketUpdateIn(data=request.data or {})
        body.is_valid(raise_exception=True)
        done = services.tool_market_update(tenant=self.tenant, actor=request.user, tool_id=pk,
                                           **body.validated_data)
        return Response({**ToolOut(done.tool).data, "message": done.message})
