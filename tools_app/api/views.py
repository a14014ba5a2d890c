"""Tools API: thin views over tools_app.services and tools_app.selectors."""

from __future__ import annotations

from typing import Any

import yaml
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status as http
from rest_framework.decorators import action
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from core import hotcache
from core.api import TenantViewSet
from core.links import public_base
from core.pagination import Pagination
from core.parsers import JSONParser, TextYAMLParser, YAMLParser
from core.renderers import EncodedRows, PageJSONRenderer, TextYAMLRenderer, YAMLRenderer
from core.throttle import ScopedWindowThrottle
from tenants_app.models import Role
from tools_app import selectors, services
from tools_app.api import serializers as s
from tools_app.connections import grants, keys, oauth_flow
from tools_app.services import approvals, discovery, invoke
from tools_app.services.tools import parse_ids

LIST_FILTERS = [
    OpenApiParameter("name", str, description="substring of the name"),
    OpenApiParameter("type", str, enum=["BUILTIN", "LOCAL", "REMOTE", "HTTP"]),
    OpenApiParameter("status", str, enum=["ENABLED", "DISABLED"]),
]


def _detail(tenant: Any, pk: Any, user: Any) -> dict[str, Any]:
    """GET /tools/{id}/'s body. Warm, from this process's memory: the tool snapshot invoke uses
    (selectors.tool_snapshot) and its rendering, both kept only while nothing in the tenant's tools changed
    (core.hotcache; health and discovery writes bump it too). The market block is read on every request: a
    catalog refresh changes entries without touching the tenant's tools."""
    snapshot = selectors.tool_snapshot(tenant=tenant, tool_id=pk)
    tool = snapshot.tool(tenant)

    def render() -> dict[str, Any]:
        body = dict(s.ToolOut(tool).data)
        body["market"] = None
        return body

    body = dict(hotcache.remembered("tool-detail", (tenant.pk, tool.pk), (hotcache.tenant_scope(tenant.pk),),
                                    render))
    if tool.market_entry_id is not None:
        body["market"] = s.market_block(selectors.tool_market(tenant=tenant, tool_id=tool.pk))
    # The caller's own view of the connection (no query for a tool without OAuth): never in the shared cache.
    body["oauth"] = selectors.oauth_state(tenant=tenant, tool=tool, user=user)
    body["my_credentials"] = selectors.user_credentials_state(tool=tool, user=user)
    return body


class ToolViewSet(TenantViewSet):
    # Starts with a digit (never a word such as all/options); DELETE /tools/{ids}/ takes a comma-separated
    # list, whose bad members parse_ids names in a 400.
    lookup_value_regex = r"[0-9][^/]*"
    # Members call tools (their use_tool grants and the approval policy apply); managing them needs an admin.
    # A member connects and disconnects their own account (per_user tools: the service asks an owner/admin for a
    # shared connection) and sets their own keys.
    action_roles = {"invoke": Role.MEMBER, "oauth_connect": Role.MEMBER, "oauth_disconnect": Role.MEMBER,
                    "my_credentials": Role.MEMBER}
    serializer_class = s.ToolOut
    # DRF's default renderers, with the JSON one taking a cached page's encoded rows (the list's, byte for byte).
    renderer_classes = [PageJSONRenderer if r is JSONRenderer else r for r in TenantViewSet.renderer_classes]

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.tool_list(tenant=tenant, filters=selectors.ToolFilters.from_query(self.request.query_params))

    @extend_schema(parameters=LIST_FILTERS, responses=s.ToolListOut(many=True))
    def list(self, request: Request) -> Response:
        """Warm, from this process's memory: the page (its count and rendered rows) is kept per tenant and query
        while nothing in the tenant's tools changed (core.hotcache, as GET /tools/{id}/; health and discovery
        writes bump it too). The links are built for each request."""
        paginator = self.paginator
        assert isinstance(paginator, Pagination)

        def render() -> tuple[int, int, int, list[Any], dict[Any, str]]:
            # The list shows no functions: tool_list's prefetch is for the detail.
            rows = paginator.paginate_queryset(self.get_queryset().prefetch_related(None), request, view=self)
            page = paginator.page
            assert page is not None and rows is not None
            return (page.paginator.count, page.paginator.per_page, page.number,
                    list(s.ToolListOut(rows, many=True).data), {})

        key = (self.tenant.pk, tuple(sorted((k, tuple(v)) for k, v in request.query_params.lists())))
        count, per_page, number, results, encoded = hotcache.remembered(
            "tool-list", key, (hotcache.tenant_scope(self.tenant.pk),), render)
        paginator.request = request
        paginator.page = Page(results, number, Paginator(range(count), per_page))
        # The rows' JSON is kept with the page (PageJSONRenderer): encoded once, not per request.
        return paginator.get_paginated_response(EncodedRows(results, encoded))

    # The id is an integer here: the route's pattern is loose only for DELETE's comma-separated ids, and a
    # string id in the schema would name `GET /tools/all/` (another operation) as this one.
    @extend_schema(parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH)], responses=s.ToolOut)
    def retrieve(self, request: Request, pk: Any = None) -> Response:
        return Response(_detail(self.tenant, pk, request.user))

    @extend_schema(request=s.ToolIn, responses={201: s.ToolOut})
    def create(self, request: Request) -> Response:
        body = s.ToolIn(data=request.data)
        body.is_valid(raise_exception=True)
        tool = services.tool_create(tenant=self.tenant, actor=request.user, data=body.to_input())
        return Response(s.ToolOut(tool).data, status=http.HTTP_201_CREATED)

    def _update(self, request: Request, pk: Any, partial: bool) -> Response:
        body = s.ToolIn(data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        tool = services.tool_update(
            tenant=self.tenant, actor=request.user, tool_id=pk, changes=body.to_input()
        )
        return Response(s.ToolOut(tool).data)

    @extend_schema(request=s.ToolIn, responses=s.ToolOut)
    def update(self, request: Request, pk: Any = None) -> Response:
        return self._update(request, pk, partial=False)

    @extend_schema(request=s.ToolIn, responses=s.ToolOut)
    def partial_update(self, request: Request, pk: Any = None) -> Response:
        return self._update(request, pk, partial=True)

    @extend_schema(
        parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH, description="comma-separated tool ids")],
        responses={204: None},
    )
    def destroy(self, request: Request, pk: Any = None) -> Response:
        services.tools_delete(tenant=self.tenant, actor=request.user, ids=parse_ids(pk or ""))
        return Response(status=http.HTTP_204_NO_CONTENT)

    @extend_schema(
        parameters=[OpenApiParameter("keyword", str), *LIST_FILTERS[1:]], responses=s.ToolBriefOut(many=True)
    )
    @action(detail=False, methods=["get"], url_path="all", pagination_class=None)
    def all(self, request: Request) -> Response:
        return Response(s.ToolBriefOut(self.get_queryset(), many=True).data)

    @extend_schema(responses=s.ToolOptionOut(many=True))
    @action(detail=False, methods=["get"], url_path="options", pagination_class=None)
    def options_(self, request: Request) -> Response:
        qs = selectors.tool_options(tenant=self.tenant, user=request.user)
        return Response(s.ToolOptionOut(qs, many=True).data)

    @extend_schema(request=s.StatusIn, responses=s.ToolOut)
    @action(detail=True, methods=["put"], url_path="status")
    def set_status(self, request: Request, pk: Any = None) -> Response:
        body = s.StatusIn(data=request.data)
        body.is_valid(raise_exception=True)
        tool = services.tool_set_status(
            tenant=self.tenant, actor=request.user, tool_id=pk, status=body.validated_data["status"]
        )
        return Response(s.ToolOut(tool).data)

    @extend_schema(request=s.IdsIn, responses={200: dict})
    @action(
        detail=False,
        methods=["post"],
        url_path="export",
        # Accept: application/yaml (or text/yaml) is a way to ask for YAML, not a reason for a 406.
        renderer_classes=[JSONRenderer, BrowsableAPIRenderer, YAMLRenderer, TextYAMLRenderer],
    )
    def export(self, request: Request) -> Response | HttpResponse:
        body = s.IdsIn(data=request.data)
        body.is_valid(raise_exception=True)
        document = services.tools_export(
            tenant=self.tenant, actor=request.user, ids=body.validated_data["ids"]
        )
        negotiated = getattr(request, "accepted_renderer", None)
        if body.validated_data["format"] == "yaml" and not isinstance(negotiated, YAMLRenderer):
            return HttpResponse(yaml.safe_dump(document, sort_keys=False), content_type="application/yaml")
        return Response(document)

    @extend_schema(request=dict, responses={200: dict})
    @action(
        detail=False, methods=["post"], url_path="import", parser_classes=[JSONParser, YAMLParser, TextYAMLParser]
    )
    def import_(self, request: Request) -> Response:
        result = services.tools_import(tenant=self.tenant, actor=request.user, document=request.data)
        code = http.HTTP_201_CREATED if result["created"] else http.HTTP_400_BAD_REQUEST
        return Response(result, status=code)


    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["delete"], url_path="oauth")
    def oauth_disconnect(self, request: Request, pk: Any = None) -> Response:
        grants.oauth_disconnect(tenant=self.tenant, actor=request.user, tool_id=pk)
        return Response(status=http.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.MyCredentialsIn, responses={200: dict, 204: None})
    @action(detail=True, methods=["get", "put", "delete"], url_path="my-credentials")
    def my_credentials(self, request: Request, pk: Any = None) -> Response:
        """The caller's own values for the tool's per-user keys: PUT sets (write-only), DELETE clears, GET says
        which are set (never a value)."""
        if request.method == "DELETE":
            keys.my_credentials_clear(tenant=self.tenant, actor=request.user, tool_id=pk)
            return Response(status=http.HTTP_204_NO_CONTENT)
        if request.method == "PUT":
            body = s.MyCredentialsIn(data=request.data)
            body.is_valid(raise_exception=True)
            return Response(keys.my_credentials_set(
                tenant=self.tenant, actor=request.user, tool_id=pk, values=body.validated_data["values"]))
        return Response(keys.my_credentials_get(tenant=self.tenant, actor=request.user, tool_id=pk))

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="oauth/connect")
    def oauth_connect(self, request: Request, pk: Any = None) -> Response:
        return Response(oauth_flow.oauth_connect(tenant=self.tenant, actor=request.user, tool_id=pk,
                                                 base_url=public_base(request)))

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="test", throttle_classes=[ScopedWindowThrottle])
    def test(self, request: Request, pk: Any = None) -> Response:
        return Response(self._with_link(request, pk, discovery.tool_test(tenant=self.tenant, actor=request.user,
                                                                          tool_id=pk)))

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="refresh", throttle_classes=[ScopedWindowThrottle])
    def refresh(self, request: Request, pk: Any = None) -> Response:
        return Response(self._with_link(request, pk, discovery.tool_refresh(tenant=self.tenant, actor=request.user,
                                                                             tool_id=pk)))

    def _with_link(self, request: Request, pk: Any, body: dict[str, Any]) -> dict[str, Any]:
        """A Test or Refresh that needed the caller's connection says so with their own link (when they may
        connect it) instead of only failing."""
        if (body.get("error") or {}).get("code") == "authorization_required":
            body["authorize_url"] = oauth_flow.authorize_link_or_none(
                tenant=self.tenant, actor=request.user, tool_id=pk, base_url=public_base(request))
        return body

    @extend_schema(request=s.InvokeIn, responses={200: s.InvokeOut})
    @action(detail=True, methods=["post"], url_path="invoke", throttle_classes=[ScopedWindowThrottle])
    def invoke(self, request: Request, pk: Any = None) -> Response:
        body = s.InvokeIn.validated(request.data)
        done = invoke.tool_invoke(
            tenant=self.tenant,
            actor=request.user,
            tool_id=pk,
            function=body["function"],
            arguments=body.get("arguments", {}),
            dry_run=body.get("dry_run", False),
        )
        outage = done.outage()
        if outage is not None:
            # The deployment's outage (no LOCAL server runner reachable, e.g. while Redis restarts), not the tool's
            # failure: the API's typed 503 with Retry-After, as for a database or cache outage; the call is audited.
            return Response(outage, status=http.HTTP_503_SERVICE_UNAVAILABLE,
                            headers={"Retry-After": str(invoke.OUTAGE_RETRY_AFTER_S)})
        answer = done.body()
        if answer.get("error_code") == "AUTHORIZATION_REQUIRED":
            # The caller's own link when they may connect it (the shared connection: owners/admins).
            answer["authorize_url"] = oauth_flow.authorize_link_or_none(
                tenant=self.tenant, actor=request.user, tool_id=pk, base_url=public_base(request))
        elif answer.get("error_code") == "CREDENTIALS_REQUIRED":
            # Which of the tool's per-user keys the caller still has to set (PUT .../my-credentials/).
            answer["credentials"] = selectors.user_credentials_state(
                tool=selectors.tool_get(tenant=self.tenant, tool_id=pk), user=request.user)
        elif answer.get("error_code") == "QUOTA_EXCEEDED":
            # Which quota, which of its limits and when it resets; Retry-After says the same in seconds.
            details = done.result.meta.get("quota") or {}
            answer["details"] = details
            refused = Response(answer, status=http.HTTP_429_TOO_MANY_REQUESTS,
                               headers={"Retry-After": str(details.get("retry_after", 1))})
            # No "Too Many Requests" warning line per refusal (django.request): a tenant hammering past its quota
            # would write one per refused call; the refusal is in the audit (folded) and the metrics already.
            refused._has_been_logged = True  # type: ignore[attr-defined]
            return refused
        return Response(answer)

    @extend_schema(request=None, responses=s.FunctionOut)
    @action(detail=True, methods=["post"], url_path=r"functions/(?P<name>[^/]+)/approve")
    def approve_function(self, request: Request, pk: Any = None, name: str = "") -> Response:
        fn = discovery.function_approve(tenant=self.tenant, actor=request.user, tool_id=pk, name=name)
        return Response(s.FunctionOut(fn).data)

    @extend_schema(request=s.FunctionPatchIn, responses=s.FunctionOut)
    @action(detail=True, methods=["patch"], url_path=r"functions/(?P<name>[^/]+)")
    def patch_function(self, request: Request, pk: Any = None, name: str = "") -> Response:
        body = s.FunctionPatchIn(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        fn = discovery.function_update(
            tenant=self.tenant,
            actor=request.user,
            tool_id=pk,
            name=name,
            enabled=body.validated_data.get("enabled"),
            requires_approval=body.validated_data.get("requires_approval", ...),
            safety=body.validated_data.get("safety", ...),
            title_override=body.validated_data.get("title_override", ...),
            description_override=body.validated_data.get("description_override", ...),
            parameter_overrides=body.validated_data.get("parameter_overrides", ...),
        )
        return Response(s.FunctionOut(fn).data)

    def get_throttles(self) -> Any:
        self.throttle_scope = {"invoke": "invoke", "test": "test", "refresh": "test"}.get(self.action or "", "")
        return super().get_throttles()


class ToolCallViewSet(TenantViewSet):
    """The audit log (admins)."""

    read_role = Role.ADMIN
    serializer_class = s.ToolCallOut

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        params = self.request.query_params
        return selectors.tool_call_list(tenant=tenant, tool=params.get("tool", ""), status=params.get("status", ""))

    @extend_schema(
        parameters=[OpenApiParameter("tool", str), OpenApiParameter("status", str)], responses=s.ToolCallOut(many=True)
    )
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.ToolCallOut(page, many=True).data)


class ApprovalViewSet(TenantViewSet):
    """Held tool calls (chat, direct invoke, gateway): list what you may decide, read, approve, deny."""

    read_role = Role.MEMBER
    write_role = Role.MEMBER
    serializer_class = s.ApprovalOut

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.approval_list(tenant=tenant, user=user, status=self.request.query_params.get("status", ""))

    @extend_schema(
        parameters=[OpenApiParameter("status", str, enum=["pending", "approved", "denied", "expired"],
                                     description="pending: still decidable (not past its expiry)")],
        responses=s.ApprovalOut(many=True),
    )
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.ApprovalOut(page, many=True).data)

    @extend_schema(responses=s.ApprovalOut)
    def retrieve(self, request: Request, pk: Any = None) -> Response:
        approval = selectors.approval_get_visible(tenant=self.tenant, user=request.user, approval_id=pk)
        return Response(s.ApprovalOut(approval).data)

    def _decide(self, request: Request, pk: Any, approve: bool, answer: Any = None) -> Response:
        decision = approvals.approval_decide(
            tenant=self.tenant, actor=request.user, approval_id=pk, approve=approve,
            answer=answer,
        )
        approval = selectors.approval_get_visible(
            tenant=self.tenant, user=request.user, approval_id=decision.approval.pk
        )
        return Response({**s.ApprovalOut(approval).data, **decision.body()})

    @extend_schema(request=s.ApprovalApproveIn, responses=s.ApprovalDecisionOut)
    @action(detail=True, methods=["post"], url_path="approve")
    def approve(self, request: Request, pk: Any = None) -> Response:
        """Approve; a direct-invoke request runs now and the answer carries the invoke body. A server's
        question held during a chat (elicitation) is approved with `answer`."""
        body = s.ApprovalApproveIn(data=request.data if isinstance(request.data, dict) else {})
        body.is_valid(raise_exception=True)
        return self._decide(request, pk, approve=True, answer=body.validated_data.get("answer"))

    @extend_schema(request=None, responses=s.ApprovalDecisionOut)
    @action(detail=True, methods=["post"], url_path="deny")
    def deny(self, request: Request, pk: Any = None) -> Response:
        return self._decide(request, pk, approve=False)
