"""Agents API: thin views over agents_app.services, agents_app.chat and agents_app.selectors."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agents_app import chat, selectors, services
from agents_app.api import serializers as s
from agents_app.chat import ChatRun
from core.api import ServiceCrudViewSet, TenantViewSet
from core.links import public_base
from core.throttle import ScopedWindowThrottle
from tenants_app.models import Role


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()


class EventStreamRenderer(BaseRenderer):
    """Lets `Accept: text/event-stream` through negotiation; errors before the stream are one `error` event."""

    media_type = "text/event-stream"
    format = "sse"
    charset = None

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        error = data.get("error", data) if isinstance(data, dict) else data
        return sse("error", error)


CHAT_RENDERERS = [JSONRenderer, BrowsableAPIRenderer, EventStreamRenderer]


def _wants_stream(request: Request, body: dict[str, Any]) -> bool:
    return bool(body.get("stream")) or "text/event-stream" in request.headers.get("Accept", "")


def _stream(run: ChatRun) -> StreamingHttpResponse:
    def frames() -> Iterator[bytes]:
        try:
            for name, data in run:
                yield sse(name, data)
        finally:
            run.close()  # a client that hangs up closes this generator: the run persists what happened

    response = StreamingHttpResponse(frames(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Conversation-Id"] = str(run.conversation_id)
    return response


def _collect(run: ChatRun) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    status, message = "error", ""
    try:
        for name, data in run:
            events.append({"event": name, "data": data})
            if name == "done":
                status, message = str(data.get("status") or "completed"), str(data.get("message") or "")
    finally:
        run.close()
    return {"conversation_id": run.conversation_id, "status": status, "message": message, "events": events}


def _respond(request: Request, run: ChatRun, stream: bool) -> StreamingHttpResponse | Response:
    if stream:
        run.interactive = True  # the user sees events as they come, so a server may ask them mid-call
        return _stream(run)
    return Response(s.ChatOut(_collect(run)).data)


class ChatModelViewSet(ServiceCrudViewSet):
    """OpenAI-compatible endpoints (admins); api_key is write-only."""

    read_role = Role.ADMIN
    serializer_class = s.ChatModelOut
    input_serializer = s.ChatModelIn

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.chat_model_list(tenant=tenant)

    def get_one(self, pk: Any) -> Any:
        return selectors.chat_model_get(tenant=self.tenant, model_id=pk)

    def do_create(self, data: Any) -> Any:
        return services.chat_model_create(tenant=self.tenant, actor=self.request.user, data=data)

    def do_update(self, pk: Any, changes: Any) -> Any:
        return services.chat_model_update(tenant=self.tenant, actor=self.request.user, model_id=pk, changes=changes)

    def do_delete(self, pk: Any) -> None:
        services.chat_model_delete(tenant=self.tenant, actor=self.request.user, model_id=pk)


class AgentViewSet(ServiceCrudViewSet):
    """Agents (admins manage; members see the agents they may use) and the chat endpoint."""

    serializer_class = s.AgentOut
    input_serializer = s.AgentIn
    # Members chat; only the management methods need an admin.
    action_roles = {"chat": Role.MEMBER}

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.agent_list(tenant=tenant, user=user)

    def get_one(self, pk: Any) -> Any:
        return self.get_object()

    def do_create(self, data: Any) -> Any:
        return services.agent_create(tenant=self.tenant, actor=self.request.user, data=data)

    def do_update(self, pk: Any, changes: Any) -> Any:
        return services.agent_update(tenant=self.tenant, actor=self.request.user, agent_id=pk, changes=changes)

    def do_delete(self, pk: Any) -> None:
        services.agent_delete(tenant=self.tenant, actor=self.request.user, agent_id=pk)

    @extend_schema(request=s.ChatIn, responses={200: s.ChatOut})
    @action(detail=True, methods=["post"], url_path="chat", throttle_classes=[ScopedWindowThrottle],
            renderer_classes=CHAT_RENDERERS)
    def chat(self, request: Request, pk: Any = None) -> StreamingHttpResponse | Response:
        body = s.ChatIn(data=request.data)
        body.is_valid(raise_exception=True)
        run = chat.chat_start(
            tenant=self.tenant,
            actor=request.user,
            agent_id=pk,
            message=body.validated_data["message"],
            conversation_id=body.validated_data.get("conversation_id"),
            base_url=public_base(request),
        )
        return _respond(request, run, _wants_stream(request, body.validated_data))

    def get_throttles(self) -> builtins.list[Any]:
        self.throttle_scope = "chat" if self.action == "chat" else ""
        return super().get_throttles()


class ConversationViewSet(TenantViewSet):
    """The user's conversations; resuming a paused run."""

    write_role = Role.MEMBER
    serializer_class = s.ConversationListOut

    def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
        return selectors.conversation_list(tenant=tenant, user=user)

    @extend_schema(responses=s.ConversationListOut(many=True))
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.ConversationListOut(page, many=True).data)

    @extend_schema(responses=s.ConversationOut)
    def retrieve(self, request: Request, pk: Any = None) -> Response:
        conversation = selectors.conversation_get(
            tenant=self.tenant, user=request.user, conversation_id=pk, admins_too=True
        )
        context = {
            "messages": selectors.conversation_messages(conversation=conversation),
            "approvals": selectors.conversation_approvals_all(conversation=conversation),
        }
        return Response(s.ConversationOut(conversation, context=context).data)

    @extend_schema(request=s.ResumeIn, responses={200: s.ChatOut})
    @action(detail=True, methods=["post"], url_path="resume", throttle_classes=[ScopedWindowThrottle],
            renderer_classes=CHAT_RENDERERS)
    def resume(self, request: Request, pk: Any = None) -> StreamingHttpResponse | Response:
        body = s.ResumeIn(data=request.data or {})
        body.is_valid(raise_exception=True)
        run = chat.conversation_resume(tenant=self.tenant, actor=request.user, conversation_id=pk,
                                           base_url=public_base(request))
        return _respond(request, run, _wants_stream(request, body.validated_data))

    def get_throttles(self) -> builtins.list[Any]:
        self.throttle_scope = "chat" if self.action == "resume" else ""
        return super().get_throttles()
