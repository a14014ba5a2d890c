"""Input and output serializers of the tools API; outputs never carry a secret value."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from core.secrets import KEEP
from core.serializers import AnyJSONField, ChoiceField, IdField, StrictInputSerializer
from tools_app.configs import mask_config
from tools_app.models import (
    Approval,
    ExpiryReason,
    Safety,
    ScreenStatus,
    Tool,
    ToolCall,
    ToolFunction,
    ToolStatus,
    ToolType,
)
from tools_app.services import ToolInput, screening


class ToolIn(StrictInputSerializer):
    name = serializers.CharField(max_length=64)
    description = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    type = ChoiceField(choices=ToolType.choices)
    status = ChoiceField(choices=ToolStatus.choices, required=False)
    config = AnyJSONField(required=False, help_text='Object to set; omitted or "" keeps; "********" keeps a key')
    safety = ChoiceField(choices=Safety.choices, required=False)
    requires_approval = serializers.BooleanField(required=False)
    unsandboxed = serializers.BooleanField(
        required=False, help_text="LOCAL only, platform operators (superusers) only: run outside the tenant sandbox")

    def to_input(self) -> ToolInput:
        data: dict[str, Any] = dict(self.validated_data)
        config = data.pop("config", KEEP)
        return ToolInput(config=KEEP if config == "" else config, **data)


class StatusIn(StrictInputSerializer):
    status = ChoiceField(choices=ToolStatus.choices)


class IdsIn(StrictInputSerializer):
    ids = serializers.ListField(child=IdField(), allow_empty=False, max_length=500)
    format = serializers.ChoiceField(choices=["json", "yaml"], required=False, default="json")


class ScreenFindingOut(serializers.Serializer[dict[str, str]]):
    rule = serializers.CharField()
    severity = serializers.ChoiceField(choices=["high", "medium", "low"])
    field = serializers.CharField()
    excerpt = serializers.CharField()


class ScreenOut(serializers.Serializer[dict[str, Any]]):
    status = serializers.ChoiceField(choices=ScreenStatus.choices)
    findings = ScreenFindingOut(many=True)


class FunctionOut(serializers.ModelSerializer[ToolFunction]):
    safety = serializers.CharField(read_only=True)
    annotated_safety = serializers.CharField(read_only=True, allow_null=True)
    safety_override = serializers.CharField(read_only=True)
    screen = serializers.SerializerMethodField()

    class Meta:
        model = ToolFunction
        # `description` and `title` are the upstream's; the overrides are what models and gateway clients get.
        fields = ["name", "title", "description", "title_override", "description_override", "parameter_overrides",
                  "input_schema",
                  "output_schema", "annotations", "state", "enabled", "requires_approval", "safety",
                  "annotated_safety", "safety_override", "unsupported_reason", "schema_hash", "screen"]

    @extend_schema_field(ScreenOut)
    def get_screen(self, fn: ToolFunction) -> dict[str, Any]:
        return screening.screen_out(fn)


class ToolListOut(serializers.ModelSerializer[Tool]):
    config_set = serializers.SerializerMethodField()

    class Meta:
        model = Tool
        fields = ["id", "name", "description", "type", "status", "safety", "requires_approval", "unsandboxed",
                  "config_set", "config_version", "consecutive_failures", "disabled_until", "last_ok_at", "last_error",
                  "created_at", "updated_at"]

    def get_config_set(self, tool: Tool) -> bool:
        return bool(tool.config)


class ToolOut(ToolListOut):
    config_summary = serializers.SerializerMethodField()
    functions = FunctionOut(many=True, read_only=True)
    market = serializers.SerializerMethodField()
    registered = serializers.SerializerMethodField(
        help_text="For a BUILTIN tool, where it comes from (builtin, host, plugin:<package>), its hooks and "
                  "whether a trial run (dry_run) is possible; null for other types or a removed plugin")

    class Meta(ToolListOut.Meta):
        fields = ToolListOut.Meta.fields + ["config_summary", "functions", "builtin_name", "last_checked_at", "market",
                                            "registered", "protocol_version", "package", "server_screen"]

    server_screen = serializers.SerializerMethodField(
        help_text="The screen on what the MCP server tells a model besides its tools (its instructions, prompts' and "
                  "resources' texts): {status, findings, approved_by, approved_at}; a held prompt or resource is "
                  "not offered to gateway clients until an admin approves it")

    @extend_schema_field(serializers.JSONField())
    def get_server_screen(self, tool: Tool) -> dict[str, Any]:
        return screening.server_screen_out(tool)

    package = serializers.SerializerMethodField(
        help_text="For a LOCAL tool run from an npm or PyPI package: {manager, name, version, requested, status: "
                  "installing|installed|failed, size, installed_at, error, serving}; null otherwise")

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_package(self, tool: Tool) -> dict[str, Any] | None:
        from tools_app.packages.services import package_view

        return package_view(tool)

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_registered(self, tool: Tool) -> dict[str, Any] | None:
        from tools_app.services.plugins import spec_for

        spec = spec_for(tool)
        if spec is None:
            return None
        return {"source": spec.source, "hooks": sorted(spec.hooks), "dry_run": spec.undone_by_rollback,
                "runs_outside_transaction": spec.runs_outside_transaction,
                "requires_user": bool(spec.plugin.requires_user)}

    @extend_schema_field(serializers.JSONField())
    def get_config_summary(self, tool: Tool) -> dict[str, Any]:
        return mask_config(tool.type, tool.config)

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_market(self, tool: Tool) -> dict[str, Any] | None:
        return market_block(tool)


def market_block(tool: Tool | None) -> dict[str, Any] | None:
    """A tool's `market` field: the entry it was loaded from and whether the catalog has a newer one."""
    entry = tool.market_entry if tool is not None else None
    if tool is None or entry is None:
        return None
    return {
        "entry_id": entry.pk,
        "entry_name": entry.name,
        "loaded_hash": tool.market_hash,
        "update_available": entry.content_hash != tool.market_hash and entry.status != "removed",
        "removed_upstream": entry.status == "removed",
        "deprecated": entry.status == "deprecated",
    }


class ToolBriefOut(serializers.ModelSerializer[Tool]):
    class Meta:
        model = Tool
        fields = ["id", "name", "type", "status"]


class FunctionBriefOut(serializers.ModelSerializer[ToolFunction]):
    description = serializers.CharField(source="offered_description", read_only=True)
    input_schema = serializers.JSONField(source="offered_input_schema", read_only=True)

    class Meta:
        model = ToolFunction
        fields = ["name", "description", "input_schema"]


class ToolOptionOut(serializers.ModelSerializer[Tool]):
    functions = serializers.SerializerMethodField()

    class Meta:
        model = Tool
        fields = ["id", "name", "description", "type", "safety", "functions"]

    @extend_schema_field(FunctionBriefOut(many=True))
    def get_functions(self, tool: Tool) -> list[dict[str, Any]]:
        return list(FunctionBriefOut(getattr(tool, "active_functions", []), many=True).data)


class ToolCallOut(serializers.ModelSerializer[ToolCall]):
    actor = serializers.CharField(source="actor.username", default=None)

    class Meta:
        model = ToolCall
        fields = ["id", "tool", "tool_name", "function", "title", "actor", "agent", "conversation", "via", "client",
                  "arguments", "status", "error_code", "error", "dry_run", "cost_ms", "result_excerpt", "result_size",
                  "created_at"]


class MyCredentialsIn(StrictInputSerializer):
    values = serializers.JSONField(help_text="{key: value} for some of the tool's per-user keys (config.user_secrets); "
                                             "write-only: never shown again")


class InvokeIn(StrictInputSerializer):
    function = serializers.CharField(max_length=128)
    arguments = serializers.DictField(required=False, default=dict)
    dry_run = serializers.BooleanField(
        required=False, default=False,
        help_text="A trial run: for tools a database rollback undoes, run and roll back, answering what would "
                  "have changed; other tools answer DRY_RUN_UNSUPPORTED",
    )

    @classmethod
    def validated(cls, data: Any) -> dict[str, Any]:
        """What `is_valid(raise_exception=True)` leaves in `validated_data`. A plain body (`plain_invoke`) is read
        without building the serializer (its fields are deep-copied per instance: ~70 us of an invoke's request
        thread); anything else, and every error, goes through the serializer, as before."""
        plain = plain_invoke(data)
        if plain is not None:
            return plain
        body = cls(data=data)
        body.is_valid(raise_exception=True)
        return dict(body.validated_data)


_INVOKE_KEYS = frozenset(("function", "arguments", "dry_run"))


def plain_invoke(data: Any) -> dict[str, Any] | None:
    """InvokeIn's validated data for a body its fields would take as it is, else None (the serializer decides).

    Plain: a JSON object of only InvokeIn's names; `function` a str whose stripped text has 1-128 characters,
    all ASCII but NUL (so no surrogate nor null character, which the CharField refuses); `arguments` absent or
    an object with str keys; `dry_run` absent or a bool. The result is the serializer's for such a body: the
    stripped function, a new dict of the same argument values (absent: {}), the bool (absent: False)."""
    if type(data) is not dict or "function" not in data or not _INVOKE_KEYS.issuperset(data):
        return None
    function = data["function"]
    if type(function) is not str:
        return None
    function = function.strip()
    if not (0 < len(function) <= 128 and function.isascii() and "\x00" not in function):
        return None
    arguments = data.get("arguments", _ABSENT)
    if arguments is _ABSENT:
        arguments = {}
    elif type(arguments) is dict and all(type(key) is str for key in arguments):
        arguments = dict(arguments)
    else:
        return None
    dry_run = data.get("dry_run", False)
    if type(dry_run) is not bool:
        return None
    return {"function": function, "arguments": arguments, "dry_run": dry_run}


_ABSENT = object()


# `data` would shadow Serializer.data, so the documented output shape is an inline serializer.
InvokeOut = inline_serializer(
    name="InvokeOut",
    fields={
        "success": serializers.BooleanField(),
        "data": serializers.JSONField(allow_null=True),
        "text": serializers.CharField(allow_blank=True),
        "error_code": serializers.CharField(allow_null=True),
        "error": serializers.CharField(allow_null=True),
        "cost_ms": serializers.IntegerField(),
        "call_id": serializers.IntegerField(),
        "meta": serializers.JSONField(required=False, help_text="The MCP result's own `_meta`, as the server sent it"),
        "approval_id": serializers.IntegerField(required=False, help_text="Set when the call awaits approval"),
        "warning": serializers.CharField(required=False, allow_null=True),
        "summary": serializers.CharField(required=False, allow_null=True,
                                         help_text="What the approval card says the call will do"),
        "expires_at": serializers.DateTimeField(required=False),
        "shown": serializers.BooleanField(help_text="A result drawn for the reader, kept whole"),
        "title": serializers.CharField(required=False, help_text="How the call is named (the tool's call_title)"),
        "dry_run": serializers.BooleanField(required=False),
        "result_withheld": serializers.BooleanField(
            required=False, help_text="A trial run of a call that needs approval: its result is not shown, only "
                                      "`changes`"),
        "changes": serializers.JSONField(
            required=False, allow_null=True,
            help_text="A trial run's rolled-back changes: objects [{model, pk, action}] and write statements per table",
        ),
    },
)


class ApprovalOut(serializers.ModelSerializer[Approval]):
    approval_id = serializers.IntegerField(source="pk")
    tool = serializers.CharField(source="tool_call.tool_name")
    tool_id = serializers.IntegerField(source="tool_call.tool_id", allow_null=True)
    function = serializers.CharField(source="tool_call.function")
    arguments = serializers.JSONField(source="tool_call.arguments", help_text="As audited: secrets redacted")
    safety = serializers.SerializerMethodField()
    conversation_id = serializers.IntegerField(source="tool_call.conversation_id", allow_null=True)
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", default=None, allow_null=True)
    title = serializers.CharField(source="tool_call.title", help_text="How the call is named for people")
    expired_reason = serializers.SerializerMethodField(
        help_text="Why it expired without running (null unless expired): timed out, the conversation moved on, "
                  "the tool's config or the arguments changed after the request, or the requester lost the right "
                  "to the call")
    expired_message = serializers.SerializerMethodField(help_text="The expiry reason in words (null unless expired)")

    class Meta:
        model = Approval
        fields = ["approval_id", "status", "via", "tool", "tool_id", "function", "title", "arguments", "safety",
                  "count", "warning", "summary", "conversation_id", "requested_by", "decided_by", "decided_at", "expires_at",
                  "created_at", "expired_reason", "expired_message"]

    @extend_schema_field(serializers.ChoiceField(choices=ExpiryReason.choices, allow_null=True))
    def get_expired_reason(self, obj: Approval) -> str | None:
        return obj.expired_reason or None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_expired_message(self, obj: Approval) -> str | None:
        return obj.expired_message or None

    def get_safety(self, obj: Approval) -> str | None:
        # The function's effective safety (its override or annotations, else the tool's), as the rule used it.
        tool = obj.tool_call.tool
        if tool is None:
            return None
        fn = tool.functions.filter(name=obj.tool_call.function).first()
        return str(fn.safety) if fn is not None else str(tool.safety)


class ApprovalApproveIn(StrictInputSerializer):
    answer = serializers.DictField(
        required=False, allow_null=True, default=None,
        help_text="Only for a server's question held during a chat (MCP elicitation): the fields it asked for, "
                  "checked against its schema; the answer goes back to the waiting call")


class ApprovalDecisionOut(ApprovalOut):
    """Schema of a decision: the approval; approving a direct invoke adds the invoke body's fields."""

    success = serializers.BooleanField(required=False)
    data = serializers.JSONField(required=False, allow_null=True)  # type: ignore[assignment]
    text = serializers.CharField(required=False, allow_blank=True)
    error_code = serializers.CharField(required=False, allow_null=True)
    error = serializers.CharField(required=False, allow_null=True)
    cost_ms = serializers.IntegerField(required=False)
    call_id = serializers.IntegerField(required=False)

    class Meta(ApprovalOut.Meta):
        fields = [*ApprovalOut.Meta.fields, "success", "data", "text", "error_code", "error", "cost_ms", "call_id"]


class FunctionPatchIn(StrictInputSerializer):
    enabled = serializers.BooleanField(required=False)
    requires_approval = serializers.BooleanField(required=False, allow_null=True)
    # An admin's safety class for this function; null or "" follows the server's annotations again.
    # (A plain string, checked by the service: one Safety enum in the schema, not a blank-able twin.)
    safety = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=16)
    # The tenant's own words for models and gateway clients; blank (or null) restores the upstream's.
    title_override = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=300)
    description_override = serializers.CharField(required=False, allow_null=True, allow_blank=True,
                                                 max_length=20000)
    # {parameter: description} for models and gateway clients; a blank value restores the upstream's.
    parameter_overrides = serializers.DictField(child=serializers.CharField(allow_blank=True, allow_null=True,
                                                                            max_length=5000), required=False)
