"""Input and output serializers of the agents API; outputs never carry an API key."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents_app.models import Agent, AgentStatus, AgentTool, ChatModel, Conversation, Message
from agents_app.services import KEEP, AgentInput, ChatModelInput, ToolLink
from core.serializers import IdField, StrictInputSerializer
from tools_app.api.serializers import ApprovalOut

MAX_MESSAGE_CHARS = 32_000


class ChatModelIn(StrictInputSerializer):
    name = serializers.CharField(max_length=64)
    base_url = serializers.CharField(max_length=500)
    model = serializers.CharField(max_length=200)
    api_key = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, write_only=True, trim_whitespace=False,
        help_text='Write-only. Omitted or "********" keeps the stored key; "" or null clears it.',
    )
    params = serializers.DictField(
        required=False,
        help_text="Extra body fields (temperature, max_tokens, ...); Toolhub reads and never sends `max_tools` "
                  "(functions per request, default 128) and `supports_vision` (true: tool images reach the "
                  "model as image parts; otherwise a description)",
    )

    def validate_params(self, value: dict[str, Any]) -> dict[str, Any]:
        if "supports_vision" in value and not isinstance(value["supports_vision"], bool):
            raise serializers.ValidationError("supports_vision must be true or false")
        return value

    def to_input(self) -> ChatModelInput:
        data: dict[str, Any] = dict(self.validated_data)
        return ChatModelInput(api_key=data.pop("api_key", KEEP), **data)


class ChatModelOut(serializers.ModelSerializer[ChatModel]):
    api_key_set = serializers.SerializerMethodField()

    class Meta:
        model = ChatModel
        fields = ["id", "name", "base_url", "model", "params", "api_key_set", "created_at"]

    def get_api_key_set(self, obj: ChatModel) -> bool:
        return bool(obj.api_key)


class ToolLinkIn(StrictInputSerializer):
    tool = IdField()
    allowed_functions = serializers.ListField(
        child=serializers.CharField(max_length=128), required=False, allow_null=True, default=None, max_length=500
    )
    requires_approval = serializers.BooleanField(required=False, allow_null=True, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # A PATCH makes the whole tree partial, so DRF skips `tool` when missing; a link still needs it.
        if "tool" not in attrs:
            raise serializers.ValidationError({"tool": [serializers.Field.default_error_messages["required"]]})
        return attrs


class AgentIn(StrictInputSerializer):
    name = serializers.CharField(max_length=64)
    description = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    system_prompt = serializers.CharField(required=False, allow_blank=True, max_length=32_000)
    model = IdField(required=False, allow_null=True, help_text="ChatModel id; null = demo model")
    max_steps = serializers.IntegerField(required=False)
    status = serializers.ChoiceField(choices=AgentStatus.choices, required=False)
    tools = ToolLinkIn(many=True, required=False)
    routing = serializers.ChoiceField(choices=["all", "intent"], required=False,
                                      help_text='"intent": each turn offers only the matched intents\' functions')
    routing_threshold = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0)
    knowledge_function = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                               help_text="<tool>__<function> that searches documents (KB intents)")
    always_on = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=50)
    tool_search = serializers.ChoiceField(
        choices=["auto", "on", "off"], required=False,
        help_text='gateway clients list `search_functions` (and `call`) instead of every function: "auto" from 40')

    def to_input(self) -> AgentInput:
        data: dict[str, Any] = dict(self.validated_data)
        tools = data.pop("tools", None)
        links = None if tools is None else [ToolLink(**dict(t)) for t in tools]
        return AgentInput(model=data.pop("model", KEEP), tools=links, **data)


class AgentToolOut(serializers.ModelSerializer[AgentTool]):
    tool_name = serializers.CharField(source="tool.name")

    class Meta:
        model = AgentTool
        fields = ["tool", "tool_name", "allowed_functions", "requires_approval"]


class AgentOut(serializers.ModelSerializer[Agent]):
    model_name = serializers.CharField(source="model.name", default=None, allow_null=True, read_only=True)
    tools = AgentToolOut(source="agent_tools", many=True, read_only=True)

    class Meta:
        model = Agent
        fields = ["id", "name", "description", "system_prompt", "model", "model_name", "max_steps", "status", "tools",
                  "routing", "routing_threshold", "knowledge_function", "always_on", "tool_search", "created_at",
                  "updated_at"]


class ChatIn(StrictInputSerializer):
    message = serializers.CharField(max_length=MAX_MESSAGE_CHARS, trim_whitespace=False)
    conversation_id = IdField(required=False, allow_null=True)
    stream = serializers.BooleanField(required=False, default=False)


class ResumeIn(StrictInputSerializer):
    stream = serializers.BooleanField(required=False, default=False)


class ChatOut(serializers.Serializer[Any]):
    conversation_id = serializers.IntegerField()
    status = serializers.CharField(help_text="completed | paused | error")
    message = serializers.CharField(allow_blank=True)
    events = serializers.ListField(child=serializers.JSONField(), help_text='[{"event": <name>, "data": {...}}]')


class MessageOut(serializers.ModelSerializer[Message]):
    class Meta:
        model = Message
        fields = ["id", "role", "content", "tool_calls", "tool_call_id", "created_at"]


class ConversationListOut(serializers.ModelSerializer[Conversation]):
    agent_name = serializers.CharField(source="agent.name")

    class Meta:
        model = Conversation
        fields = ["id", "agent", "agent_name", "title", "status", "created_at", "updated_at"]


class ConversationOut(ConversationListOut):
    messages = serializers.SerializerMethodField()
    approvals = serializers.SerializerMethodField()

    class Meta(ConversationListOut.Meta):
        fields = ConversationListOut.Meta.fields + ["messages", "approvals"]

    @extend_schema_field(MessageOut(many=True))
    def get_messages(self, obj: Conversation) -> list[dict[str, Any]]:
        return list(MessageOut(self.context["messages"], many=True).data)

    @extend_schema_field(ApprovalOut(many=True))
    def get_approvals(self, obj: Conversation) -> list[dict[str, Any]]:
        return list(ApprovalOut(self.context["approvals"], many=True).data)
