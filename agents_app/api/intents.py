"""Intents API: the tree's CRUD, import/export (JSON or YAML) and `route`."""

from __future__ import annotations

from typing import Any

import yaml
from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework import status as http
from rest_framework.decorators import action
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from agents_app import selectors as agent_selectors
from agents_app import toolsets
from agents_app.errors import AgentNotFound
from agents_app.intents import routing, selectors
from agents_app.models import IntentKind, IntentLevel, IntentNode, IntentStatus
from agents_app.services import intents as services
from core.api import ServiceCrudViewSet
from core.errors import NotFound
from core.parsers import TextYAMLParser, YAMLParser
from core.serializers import StrictInputSerializer
from tenants_app.models import Role

EXPORT_FORMAT = "toolhub.intents/1"


class IntentIn(StrictInputSerializer):
    code = serializers.CharField(max_length=64)
    name = serializers.CharField(max_length=128)
    level = serializers.ChoiceField(choices=IntentLevel.choices, required=False)
    kind = serializers.ChoiceField(choices=IntentKind.choices, required=False)
    description = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    parent = serializers.JSONField(  # type: ignore[assignment]
        required=False, allow_null=True, help_text="parent intent code (or id); null = root")
    functions = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=100,
                                      help_text='["<tool>__<function>"] of this tenant\'s tools')
    status = serializers.ChoiceField(choices=IntentStatus.choices, required=False)
    version = serializers.IntegerField(required=False, min_value=1,
                                       help_text="on update: the version you read; a newer stored one answers 409")
    examples = serializers.ListField(child=serializers.CharField(max_length=500, allow_blank=True), required=False,
                                     max_length=200)

    def to_input(self) -> services.IntentInput:
        data: dict[str, Any] = dict(self.validated_data)
        parent = data.pop("parent", services._UNSET) if "parent" in data else services._UNSET
        return services.IntentInput(parent=parent, **data)


class IntentOut(serializers.ModelSerializer[IntentNode]):
    parent = serializers.SerializerMethodField()  # type: ignore[assignment]
    functions = serializers.SerializerMethodField()
    examples = serializers.SerializerMethodField()

    class Meta:
        model = IntentNode
        fields = ["id", "code", "name", "level", "kind", "description", "parent", "functions", "status", "version",
                  "examples", "created_at", "updated_at"]

    def get_parent(self, obj: IntentNode) -> str | None:
        return obj.parent.code if obj.parent_id and obj.parent is not None else None

    def get_functions(self, obj: IntentNode) -> list[str]:
        return sorted(f"{f.tool.name}__{f.name}" for f in obj.functions.all())

    def get_examples(self, obj: IntentNode) -> list[str]:
        return [e.text for e in obj.examples.all()]


class RouteIn(StrictInputSerializer):
    question = serializers.CharField(max_length=4000)
    agent = serializers.IntegerField(required=False, allow_null=True)
    top_k = serializers.IntegerField(required=False, min_value=1, max_value=20, default=3)


class RouteMatchOut(serializers.Serializer[Any]):
    intent = serializers.CharField()
    score = serializers.FloatField()
    path = serializers.ListField(child=serializers.CharField())
    kind = serializers.CharField()
    functions = serializers.ListField(child=serializers.CharField())


class RouteOut(serializers.Serializer[Any]):
    matches = RouteMatchOut(many=True)
    cost_ms = serializers.IntegerField()


class ExportIn(StrictInputSerializer):
    ids = serializers.ListField(child=serializers.IntegerField(), required=False, allow_null=True,
                                help_text="omitted or null = the whole tree")
    format = serializers.ChoiceField(choices=["json", "yaml"], required=False, default="json")


def export_document(nodes: list[IntentNode]) -> dict[str, Any]:
    items = []
    for data in IntentOut(nodes, many=True).data:
        item = {k: data[k] for k in ("code", "name", "level", "kind", "description", "parent", "functions", "status",
                                     "version", "examples")}
        items.append(item)
    return {"format": EXPORT_FORMAT, "intents": items}


class IntentViewSet(ServiceCrudViewSet):
    """The tenant's intent tree (admins write, members read and route)."""

    read_role = Role.MEMBER
    serializer_class = IntentOut
    input_serializer = IntentIn

    action_roles = {"route": Role.MEMBER}

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        params = self.request.query_params
        return selectors.intent_list(tenant=tenant, filters={k: params.get(k, "") for k in
                                                             ("level", "kind", "status", "parent", "q")})

    def get_one(self, pk: Any) -> Any:
        return selectors.intent_get(tenant=self.tenant, intent_id=pk)

    def do_create(self, data: Any) -> Any:
        return services.intent_create(tenant=self.tenant, actor=self.request.user, data=data)

    def do_update(self, pk: Any, changes: Any) -> Any:
        return services.intent_update(tenant=self.tenant, actor=self.request.user, intent_id=pk, changes=changes)

    def do_delete(self, pk: Any) -> None:
        services.intent_delete(tenant=self.tenant, actor=self.request.user, intent_id=pk)

    @extend_schema(request=RouteIn, responses=RouteOut)
    @action(detail=False, methods=["post"], url_path="route")
    def route(self, request: Request) -> Response:
        body = RouteIn(data=request.data)
        body.is_valid(raise_exception=True)
        tenant, user = self.tenant, request.user
        agent = None
        if body.validated_data.get("agent") is not None:
            agent = agent_selectors.agent_get(tenant=tenant, agent_id=body.validated_data["agent"])
            if not agent_selectors.agent_may_use(tenant=tenant, user=user, agent=agent):
                raise AgentNotFound()  # an agent you may not use is missing to you
        toolset = (toolsets.build_toolset(tenant=tenant, actor=user, agent=agent) if agent is not None
                   else toolsets.caller_toolset(tenant=tenant, actor=user))
        matches, cost_ms = routing.route_question(tenant=tenant, question=body.validated_data["question"],
                                                  toolset=toolset, agent=agent, top_k=body.validated_data["top_k"])
        return Response({"matches": matches, "cost_ms": cost_ms})

    @extend_schema(request=ExportIn, responses={200: dict})
    @action(detail=False, methods=["post"], url_path="export")
    def export(self, request: Request) -> Response | HttpResponse:
        body = ExportIn(data=request.data or {})
        body.is_valid(raise_exception=True)
        nodes = list(selectors.intent_list(tenant=self.tenant))
        ids = body.validated_data.get("ids")
        if ids is not None:
            wanted = set(ids)
            nodes = [n for n in nodes if n.pk in wanted]
            if len(nodes) != len(wanted):
                raise NotFound()  # one missing (or foreign) id fails the export
        document = export_document(nodes)
        if body.validated_data["format"] == "yaml" or "yaml" in request.headers.get("Accept", ""):
            return HttpResponse(yaml.safe_dump(document, sort_keys=False, allow_unicode=True),
                                content_type="application/yaml")
        return Response(document)

    @extend_schema(request=dict, responses={201: dict})
    @action(detail=False, methods=["post"], url_path="import",
            parser_classes=[JSONParser, YAMLParser, TextYAMLParser])
    def import_(self, request: Request) -> Response:
        document = request.data
        items = document.get("intents") if isinstance(document, dict) else document
        result = services.intent_import(tenant=self.tenant, actor=request.user, items=items)
        return Response(result, status=http.HTTP_201_CREATED)
