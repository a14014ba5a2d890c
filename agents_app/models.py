"""ChatModel, Agent, AgentTool, Conversation, Message, and the intent tree (IntentNode, IntentExample)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.fields import EncryptedJSONField
from core.hotcache import TenantBumpingQuerySet
from tenants_app.models import Tenant


class ChatModel(models.Model):
    """Any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LiteLLM)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="chat_models")
    name = models.CharField(max_length=64)
    base_url = models.URLField(max_length=500)
    model = models.CharField(max_length=200)
    api_key = EncryptedJSONField(null=True, blank=True)
    params = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_model_name_per_tenant")]

    def __str__(self) -> str:
        return self.name


class AgentStatus(models.TextChoices):
    ENABLED = "ENABLED", "Enabled"
    DISABLED = "DISABLED", "Disabled"


class AgentToolQuerySet(TenantBumpingQuerySet["AgentTool"]):
    tenant_path = "agent__tenant_id"


class Agent(models.Model):
    # Bulk writes drop the tenant's hot-path snapshots (toolsets, gateway listings) too (core.hotcache).
    objects = TenantBumpingQuerySet.as_manager()

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True, default="")
    system_prompt = models.TextField(blank=True, default="")
    model = models.ForeignKey(ChatModel, null=True, blank=True, on_delete=models.PROTECT, related_name="agents")
    max_steps = models.PositiveIntegerField(default=8)
    status = models.CharField(max_length=16, choices=AgentStatus.choices, default=AgentStatus.ENABLED)
    # Intent routing (agents_app.intents): "intent" offers each turn only the matched intents' functions.
    routing = models.CharField(max_length=8, default="all", choices=[("all", "all"), ("intent", "intent")])
    routing_threshold = models.FloatField(null=True, blank=True, help_text="null = TOOLHUB_INTENT_THRESHOLD")
    knowledge_function = models.CharField(max_length=200, blank=True, default="",
                                          help_text="<tool>__<function> that searches documents (KB intents)")
    always_on = models.JSONField(default=list, blank=True, help_text="<tool>__<function> refs offered every turn")
    # Tool search for gateway clients (agents_app.gateway.search): "auto" is on from TOOL_SEARCH_AUTO_FROM functions.
    tool_search = models.CharField(max_length=8, default="auto",
                                   choices=[("auto", "auto"), ("on", "on"), ("off", "off")])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_agent_name_per_tenant")]
        permissions = [("use_agent", "Can chat with the agent")]

    def __str__(self) -> str:
        return self.name


class AgentTool(models.Model):
    objects = AgentToolQuerySet.as_manager()

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="agent_tools")
    tool = models.ForeignKey("tools_app.Tool", on_delete=models.CASCADE, related_name="agent_links")
    allowed_functions = models.JSONField(null=True, blank=True, help_text="null = all functions")
    requires_approval = models.BooleanField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "tool"], name="uniq_agent_tool")]

    def __str__(self) -> str:
        return f"{self.agent} uses {self.tool}"


class ConversationStatus(models.TextChoices):
    IDLE = "idle", "Idle"
    RUNNING = "running", "Running"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    # A call waits for its user to connect an account or set their keys; resume runs it again.
    AWAITING_AUTHORIZATION = "awaiting_authorization", "Awaiting authorization"


class Conversation(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="conversations")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="conversations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    title = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=24, choices=ConversationStatus.choices, default=ConversationStatus.IDLE)
    # The paused run: pending tool calls and the transcript position (see agents_app.services).
    run_state = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title or f"Conversation #{self.pk}"


class Message(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16)
    content = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        text = " ".join(self.content.split())
        return f"{self.role}: {text[:60]}{'…' if len(text) > 60 else ''}"


# --- intent routing (Ragent's intent tree) ---------------------------------------------------------


class AgentRouting(models.TextChoices):
    ALL = "all", "Offer the whole toolset"
    INTENT = "intent", "Offer the functions of the matched intents"


class IntentLevel(models.TextChoices):
    DOMAIN = "DOMAIN", "Domain"
    CATEGORY = "CATEGORY", "Category"
    TOPIC = "TOPIC", "Topic"


class IntentKind(models.TextChoices):
    KB = "KB", "Knowledge base"
    KB_AND_MCP = "KB_AND_MCP", "Knowledge base and tools"
    MCP = "MCP", "Tools"
    SYSTEM = "SYSTEM", "System (no tools)"


class IntentStatus(models.TextChoices):
    ENABLED = "ENABLED", "Enabled"
    DISABLED = "DISABLED", "Disabled"


class IntentNode(models.Model):
    """A node of a tenant's intent tree; TOPIC nodes usually carry the example questions and functions."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="intent_nodes")
    code = models.CharField(max_length=64)
    name = models.CharField(max_length=128)
    level = models.CharField(max_length=16, choices=IntentLevel.choices, default=IntentLevel.TOPIC)
    kind = models.CharField(max_length=16, choices=IntentKind.choices, default=IntentKind.MCP)
    description = models.TextField(blank=True, default="")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    functions = models.ManyToManyField("tools_app.ToolFunction", blank=True, related_name="intents")
    status = models.CharField(max_length=16, choices=IntentStatus.choices, default=IntentStatus.ENABLED)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["code"]
        constraints = [models.UniqueConstraint(fields=["tenant", "code"], name="uniq_intent_code_per_tenant")]

    def __str__(self) -> str:
        return f"{self.code} ({self.name})"


class IntentExample(models.Model):
    """An example question of a node; its sentence embedding is stored once computed (see agents_app.tasks)."""

    node = models.ForeignKey(IntentNode, on_delete=models.CASCADE, related_name="examples")
    text = models.CharField(max_length=500)
    position = models.PositiveIntegerField(default=0)
    embedding = models.BinaryField(null=True, blank=True, editable=False)
    embedding_model = models.CharField(max_length=100, blank=True, default="", editable=False)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.text
