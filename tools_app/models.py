"""Tool, ToolFunction, ToolCall (the audit log) and Approval."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.fields import EncryptedJSONField
from core.hotcache import TenantBumpingQuerySet
from tenants_app.models import Tenant


class ToolType(models.TextChoices):
    BUILTIN = "BUILTIN", "Built-in"
    LOCAL = "LOCAL", "Local MCP (stdio)"
    REMOTE = "REMOTE", "Remote MCP (HTTP)"
    HTTP = "HTTP", "HTTP tool"


class ToolStatus(models.TextChoices):
    ENABLED = "ENABLED", "Enabled"
    DISABLED = "DISABLED", "Disabled"


class Safety(models.TextChoices):
    READ_ONLY = "READ_ONLY", "Read only"
    WRITE = "WRITE", "Write"
    DESTRUCTIVE = "DESTRUCTIVE", "Destructive"


class FunctionQuerySet(TenantBumpingQuerySet["ToolFunction"]):
    tenant_path = "tool__tenant_id"


class Tool(models.Model):
    # Bulk writes (update, bulk_create) drop the tenant's hot-path snapshots too (core.hotcache).
    objects = TenantBumpingQuerySet.as_manager()

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True, default="")
    type = models.CharField(max_length=16, choices=ToolType.choices)
    status = models.CharField(max_length=16, choices=ToolStatus.choices, default=ToolStatus.ENABLED)
    config = EncryptedJSONField(null=True, blank=True)
    config_version = models.PositiveIntegerField(default=1)
    safety = models.CharField(max_length=16, choices=Safety.choices, default=Safety.WRITE)
    requires_approval = models.BooleanField(default=False)
    # Function names an imported client config marked autoApprove (kept only where the tenant allows it):
    # discovery then flags every other function of the tool as requiring approval (see discovery).
    auto_approve_functions = models.JSONField(default=list, blank=True)
    builtin_name = models.CharField(max_length=64, blank=True, default="")
    market_entry = models.ForeignKey(
        "market_app.MarketEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="tools"
    )
    market_hash = models.CharField(max_length=64, blank=True, default="")
    # LOCAL only: run the server as Toolhub's own user, outside the tenant sandbox. Set only by a platform operator
    # (superuser), shown in red on the tool page; every other LOCAL server is sandboxed.
    unsandboxed = models.BooleanField(default=False)
    # Health and failure breaker; in the database so every process agrees.
    consecutive_failures = models.PositiveIntegerField(default=0)
    disabled_until = models.DateTimeField(null=True, blank=True)
    last_ok_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_checked_at = models.DateTimeField(null=True, blank=True)
    # The MCP revision the server last spoke with Toolhub (2026-07-28 by server/discover, a 2025 one by the
    # handshake), kept from its last successful Test, refresh or health check; empty before the first one.
    protocol_version = models.CharField(
        max_length=32, blank=True, default="",
        help_text="The MCP revision the server last spoke with Toolhub (its last successful Test, refresh or health "
                  "check): 2026-07-28, or a 2025 revision by the initialize handshake; empty before the first one.")
    # The screen on what the server tells a model besides its tools (tools_app.services.screening.screen_server):
    # {status, findings, version, key, instructions, prompts, resources, items, approved_key, approved_items,
    # approved_by, approved_at}. The server's instructions are kept here for review and passed to no model.
    server_screen = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_tool_name_per_tenant")]
        indexes = [models.Index(fields=["tenant", "type", "status"])]
        permissions = [("use_tool", "Can use the tool in chats and invocations")]

    def __str__(self) -> str:
        return self.name

    @property
    def in_failure_window(self) -> bool:
        return self.disabled_until is not None and self.disabled_until > timezone.now()


class FunctionState(models.TextChoices):
    ACTIVE = "ACTIVE", "Active"
    CHANGED = "CHANGED", "Changed (awaiting approval)"
    REMOVED = "REMOVED", "Removed"
    # The screen found instructions aimed at the model (tools_app.services.screening); offered nowhere until approved.
    HELD = "HELD", "Held by the screen (awaiting approval)"


class ScreenStatus(models.TextChoices):
    CLEAR = "clear", "Clear"
    FLAGGED = "flagged", "Flagged"
    HELD = "held", "Held"
    APPROVED = "approved", "Approved"


class ToolFunction(models.Model):
    objects = FunctionQuerySet.as_manager()

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="functions")
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True, default="")
    input_schema = models.JSONField(default=dict)
    output_schema = models.JSONField(null=True, blank=True)
    annotations = models.JSONField(null=True, blank=True)
    schema_hash = models.CharField(max_length=64)
    approved_hash = models.CharField(max_length=64, blank=True, default="")
    # What was trusted (description, schemas, annotations), so a CHANGED function can be shown as a diff.
    approved_definition = models.JSONField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=FunctionState.choices, default=FunctionState.ACTIVE)
    enabled = models.BooleanField(default=True)
    requires_approval = models.BooleanField(null=True, blank=True)
    # An admin's choice beats what the server's annotations claim (blank: follow the annotations).
    safety_override = models.CharField(max_length=16, choices=Safety.choices, blank=True, default="")
    # Why Toolhub cannot call this function (e.g. it requires MCP tasks); blank when it can.
    unsupported_reason = models.CharField(max_length=300, blank=True, default="")
    # As the server sent them, served by the MCP gateway; not part of schema_hash (display, not contract).
    title = models.CharField(max_length=300, blank=True, default="")
    meta = models.JSONField(null=True, blank=True, help_text="The server's `_meta` of this tool (e.g. an MCP Apps UI)")
    icons = models.JSONField(null=True, blank=True)
    # The screen on the upstream's own text (tools_app.services.screening): findings [{rule, severity, field,
    # excerpt}], the rules' version, and who approved which definition (schema_hash) with its findings.
    screen_status = models.CharField(max_length=16, choices=ScreenStatus.choices, default=ScreenStatus.CLEAR)
    screen_findings = models.JSONField(default=list, blank=True)
    screen_version = models.PositiveIntegerField(default=0)
    screen_approved_hash = models.CharField(max_length=64, blank=True, default="")
    screen_approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                           related_name="+")
    screen_approved_at = models.DateTimeField(null=True, blank=True)
    # The tenant's own words for the function, given to models and gateway clients instead of the upstream's;
    # drift and the screen keep watching the upstream's (`title`, `description`). Blank: the upstream's.
    title_override = models.CharField(max_length=300, blank=True, default="")
    description_override = models.TextField(blank=True, default="")
    # {parameter: description} the tenant gives instead of the upstream's (top-level properties of input_schema).
    parameter_overrides = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tool", "name"], name="uniq_function_per_tool")]

    @property
    def offered_description(self) -> str:
        """What models and gateway clients read: the tenant's override, else the upstream's description."""
        return self.description_override or self.description

    @property
    def offered_title(self) -> str:
        return self.title_override or self.title

    @property
    def offered_input_schema(self) -> dict[str, Any]:
        return with_parameter_overrides(self.input_schema, self.parameter_overrides)

    def __str__(self) -> str:
        return f"{self.tool.name}.{self.name}"

    def definition(self) -> dict[str, Any]:
        """The definition as offered now (what an approval trusts)."""
        return {"description": self.description, "input_schema": self.input_schema,
                "output_schema": self.output_schema, "annotations": self.annotations}

    @property
    def annotated_safety(self) -> str | None:
        """What the MCP annotations say: readOnlyHint -> READ_ONLY, destructiveHint -> DESTRUCTIVE, else None."""
        return safety_from_annotations(self.annotations)

    @property
    def safety(self) -> str:
        """Effective safety: a DESTRUCTIVE tool, else the admin's override, else the annotations, else the tool's."""
        return function_safety(tool_safety=self.tool.safety, override=self.safety_override,
                               annotations=self.annotations)


def with_parameter_overrides(schema: Any, overrides: Any) -> dict[str, Any]:
    """`schema` with the tenant's descriptions of its top-level parameters (a copy; the stored one is upstream's)."""
    if not isinstance(schema, dict):
        return {}
    if not overrides or not isinstance(schema.get("properties"), dict):
        return schema
    properties = {name: ({**prop, "description": overrides[name]} if name in overrides and isinstance(prop, dict)
                         else prop) for name, prop in schema["properties"].items()}
    return {**schema, "properties": properties}


def function_safety(*, tool_safety: str, override: str, annotations: dict[str, Any] | None) -> str:
    """One function's safety class. A DESTRUCTIVE tool makes every function DESTRUCTIVE (stricter wins);
    otherwise an admin's override beats the server's annotations, which beat the tool's own class."""
    if tool_safety == Safety.DESTRUCTIVE:
        return Safety.DESTRUCTIVE
    return override or safety_from_annotations(annotations) or tool_safety


def safety_from_annotations(annotations: dict[str, Any] | None) -> str | None:
    """MCP tool annotations to a safety class; unannotated functions follow their tool."""
    if not isinstance(annotations, dict):
        return None
    if annotations.get("readOnlyHint") is True:
        return Safety.READ_ONLY
    if annotations.get("destructiveHint") is True:
        return Safety.DESTRUCTIVE
    if annotations.get("readOnlyHint") is False and annotations.get("destructiveHint") is False:
        return Safety.WRITE
    return None


class CallStatus(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"
    DENIED = "denied", "Denied"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    # A 2026-07-28 server's questions were handed back to the caller (a gateway client): the call's one row, its
    # outcome saved when the caller's last answer completes it (tools_app.services.invoke, `continuing`).
    AWAITING_INPUT = "awaiting_input", "Awaiting input"


class ToolCall(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tool_calls")
    tool = models.ForeignKey(Tool, null=True, on_delete=models.SET_NULL, related_name="calls")
    tool_name = models.CharField(max_length=64)
    function = models.CharField(max_length=128)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    agent = models.ForeignKey("agents_app.Agent", null=True, blank=True, on_delete=models.SET_NULL)
    conversation = models.ForeignKey("agents_app.Conversation", null=True, blank=True, on_delete=models.SET_NULL)
    # Where the call came from (ApprovalVia): "invoke" (the API), "chat", "gateway" (an MCP client through /mcp/...)
    # or "admin" (Try on the tool's page).
    via = models.CharField(max_length=16, blank=True, default="")
    # Through the gateway with an OAuth access token: the name the client registered (RFC 7591 client_name).
    client = models.CharField(max_length=200, blank=True, default="")
    # How the call is named for people (a plugin's call_title hook), e.g. "Delete 3 orders"; else the tool's name.
    title = models.CharField(max_length=200, blank=True, default="")
    # A trial run: executed inside a transaction that was rolled back, so nothing it did was kept.
    dry_run = models.BooleanField(default=False)
    arguments = models.JSONField(default=dict)
    status = models.CharField(max_length=24, choices=CallStatus.choices)
    error_code = models.CharField(max_length=32, blank=True, default="")
    error = models.TextField(blank=True, default="")
    cost_ms = models.PositiveIntegerField(default=0)
    result_excerpt = models.TextField(blank=True, default="")
    result_size = models.PositiveIntegerField(default=0)
    # The MCP content list with long strings cut (image data, blobs), and the server's log messages.
    result_content = models.JSONField(null=True, blank=True)
    server_logs = models.JSONField(null=True, blank=True)
    # The screen's injection markers the result carried (e.g. invisible_tags, ignore_previous); [] when clean.
    result_flags = models.JSONField(null=True, blank=True, default=list)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The row's identity before it is stored: a row spooled during a database outage (services.audit_spool) is
    # inserted once however often it is replayed. Null only on rows written before it existed.
    call_uid = models.UUIDField(null=True, unique=True, editable=False, default=uuid.uuid4)
    # How many calls the row stands for: 1, except a row of quota refusals folded together (N refused calls of one
    # member, tool and function in one UTC minute, after the first: tools_app.services.quota_refusals).
    call_count = models.PositiveIntegerField(default=1)
    # A call awaiting input: when its server's questions were last handed to the caller, or a round answering them
    # last began. The caller's sealed requestState expires TOOLHUB_MCP_REQUEST_STATE_TTL_S after; a row still
    # awaiting input then was abandoned, and the sweep ends it (tools_app.services.abandoned_input). Else null.
    input_asked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "status"]), models.Index(fields=["tenant", "tool"])]

    def __str__(self) -> str:
        return f"{self.tool_name}.{self.function} ({self.get_status_display().lower()}, call #{self.pk})"

    def via_label(self) -> str:
        """Where the call came from, in words ("Admin (Try)", "MCP gateway", ...)."""
        return str(dict(ApprovalVia.choices).get(self.via, self.via or "-"))


class ScreenedFunction(ToolFunction):
    """Functions the screen found something in (the admin's "Screen findings"): see tools_app.admin.screen."""

    class Meta:
        proxy = True
        verbose_name = "screen finding"
        verbose_name_plural = "screen findings"


class RefusedCall(ToolCall):
    """The audit rows of calls refused for bad input (the admin's "Refused calls"): see tools_app.admin.refused."""

    class Meta:
        proxy = True
        verbose_name = "refused call"
        verbose_name_plural = "refused calls"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    EXPIRED = "expired", "Expired"


class ApprovalVia(models.TextChoices):
    CHAT = "chat", "Chat"
    INVOKE = "invoke", "Direct invoke"
    GATEWAY = "gateway", "MCP gateway"
    # A person's Try on the tool's admin page: a direct call too (held calls run once approved), told apart in audit.
    ADMIN = "admin", "Admin (Try)"


class ExpiryReason(models.TextChoices):
    """Why an approval expired without running its call (the API's `expired_reason`)."""

    TIMED_OUT = "timed_out", "not decided in time"
    MOVED_ON = "moved_on", "the conversation moved on"
    NOT_ANSWERED = "not_answered", "the server's question was not answered in time"
    CONFIG_CHANGED = "config_changed", "the tool's configuration changed after the request"
    ARGUMENTS_CHANGED = "arguments_changed", "the arguments differ from the ones reviewed"
    TOOL_REMOVED = "tool_removed", "the tool was deleted"
    REQUESTER_REMOVED = "requester_removed", "the requester left the tenant"
    REQUESTER_ROLE = "requester_role", "the requester's role no longer allows calls"
    TOOL_NOT_USABLE = "tool_not_usable", "the requester may no longer use the tool"
    AGENT_NOT_USABLE = "agent_not_usable", "the requester may no longer use the agent"
    FUNCTION_NOT_ALLOWED = "function_not_allowed", "the agent no longer offers the function"


class Approval(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="approvals")
    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="approval")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING)
    via = models.CharField(max_length=16, choices=ApprovalVia.choices, default=ApprovalVia.CHAT)
    # The held call's arguments, unredacted and encrypted, for the call an approval runs itself (direct
    # invoke, gateway); cleared once decided. Chat runs keep theirs in the conversation transcript.
    held_arguments = EncryptedJSONField(null=True, blank=True)
    count = models.PositiveIntegerField(default=1)
    warning = models.TextField(blank=True, default="")
    # What the approval card says the call will do (a plugin's before_approval hook), e.g. "delete 37 orders".
    summary = models.CharField(max_length=500, blank=True, default="")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    # What the person reviews, bound at the request: the tool's config version and a digest of the arguments
    # (canonical JSON). Approving a call whose tool or arguments no longer match runs nothing (it expires).
    config_version = models.PositiveIntegerField(null=True, blank=True)
    arguments_digest = models.CharField(max_length=64, blank=True, default="")
    # Why it expired (blank unless expired), and the words shown with it.
    expired_reason = models.CharField(max_length=32, choices=ExpiryReason.choices, blank=True, default="")
    expired_message = models.CharField(max_length=500, blank=True, default="")
    # The audit row of the run an approval started (direct invoke, gateway, admin Try): `tool_call` is the request.
    result_call = models.ForeignKey(ToolCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Approval #{self.pk} ({self.get_status_display().lower()})"


class OAuthRegistration(models.Model):
    """Toolhub's client at one authorization server (DCR or configured), reused by every tool and user of it."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="oauth_registrations")
    issuer = models.CharField(max_length=500)
    redirect_uri = models.CharField(max_length=500)
    client_id = models.CharField(max_length=512)
    # {client_secret, auth_method}: encrypted, never shown.
    secret = EncryptedJSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "issuer", "redirect_uri"],
                                               name="oauth_registration_once_per_server")]

    def __str__(self) -> str:
        return f"OAuth client at {self.issuer}"


class OAuthStatus(models.TextChoices):
    CONNECTED = "connected", "Connected"
    NEEDS_AUTHORIZATION = "needs_authorization", "Needs authorization"


class OAuthConnection(models.Model):
    """A tool's OAuth grant: shared (user null) or one member's own; tokens encrypted at rest."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="oauth_connections")
    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="oauth_connections")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")
    connected_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    status = models.CharField(max_length=24, choices=OAuthStatus.choices, default=OAuthStatus.CONNECTED)
    # {access_token, refresh_token}: encrypted, never shown.
    tokens = EncryptedJSONField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    scopes = models.CharField(max_length=1000, blank=True, default="")
    # Discovery (resource, issuer, server metadata) as it was when connected: refresh and revoke go there.
    discovery = models.JSONField(default=dict)
    registration = models.ForeignKey(OAuthRegistration, on_delete=models.PROTECT, related_name="connections")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tool", "user"], name="oauth_connection_per_tool_user"),
            models.UniqueConstraint(fields=["tool"], condition=models.Q(user__isnull=True),
                                    name="oauth_connection_one_shared"),
        ]

    def __str__(self) -> str:
        return f"OAuth connection of tool {self.tool_id} ({'shared' if self.user_id is None else 'personal'}, {self.status})"


class OAuthFlow(models.Model):
    """One authorization in progress: single-use state and PKCE verifier, bound to its user, then its session."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    shared = models.BooleanField(default=False)
    state = models.CharField(max_length=128, unique=True)
    # {code_verifier}: encrypted; gone once the flow is used.
    secret = EncryptedJSONField(null=True, blank=True)
    authorize_url = models.TextField()
    redirect_uri = models.CharField(max_length=500)
    discovery = models.JSONField(default=dict)
    registration = models.ForeignKey(OAuthRegistration, on_delete=models.CASCADE, related_name="+")
    session_hash = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"OAuth authorization of tool {self.tool_id} (expires {self.expires_at:%Y-%m-%d %H:%M})"




class UserCredential(models.Model):
    """One member's own values for the keys a tool declares per user (`user_secrets`): encrypted, never shown."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="user_credentials")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    values = EncryptedJSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tool", "user"], name="user_credential_per_tool_user")]

    def __str__(self) -> str:
        return f"Credentials of user {self.user_id} for tool {self.tool_id}"


class QuotaScope(models.TextChoices):
    TENANT = "tenant", "Tenant"
    MEMBER = "member", "Member"
    AGENT = "agent", "Agent"
    TOOL = "tool", "Tool"


class Quota(models.Model):
    """Calls per minute, per day and at once for the tenant, a member, an agent or a tool (tools_app.services.quotas).

    `target` is the member's username or the agent or tool id, as the API takes it; empty for the tenant, and for
    the other scopes the default each member, agent or tool gets unless a quota names it. `target_id` is the row
    it names (user, agent or tool id), the key its counters are kept under.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas")
    scope = models.CharField(max_length=16, choices=QuotaScope.choices)
    target = models.CharField(max_length=150, blank=True, default="")
    target_id = models.BigIntegerField(null=True, blank=True)
    per_minute = models.PositiveIntegerField(null=True, blank=True)
    per_day = models.PositiveIntegerField(null=True, blank=True)
    concurrent = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "scope", "target"], name="quota_one_per_target")]
        ordering = ["scope", "target", "id"]

    def __str__(self) -> str:
        return f"{self.scope}:{self.target or '*'}"


class AuditEvent(models.Model):
    """The audit stream's outbox (tools_app.services.audit_stream): one row per call once it has its outcome, in
    the order outcomes were recorded; a shipper sends what lies past its cursor."""

    id = models.BigAutoField(primary_key=True)
    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"audit event {self.pk} (call {self.tool_call_id})"


class AuditCursor(models.Model):
    """How far one audit sink has been sent: the last AuditEvent id it acknowledged."""

    sink = models.CharField(max_length=64, unique=True)
    last_id = models.BigIntegerField(default=0)
    shipped = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    last_error = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"audit sink {self.sink} at event {self.last_id}"
