"""ChatModel, Agent, AgentTool, Conversation and Message."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.fields import EncryptedJSONField
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


class Agent(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True, default="")
    system_prompt = models.TextField(blank=True, default="")
    model = models.ForeignKey(ChatModel, null=True, blank=True, on_delete=models.PROTECT, related_name="agents")
    max_steps = models.PositiveIntegerField(default=8)
    status = models.CharField(max_length=16, choices=AgentStatus.choices, default=AgentStatus.ENABLED)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_agent_name_per_tenant")]
        permissions = [("use_agent", "Can chat with the agent")]

    def __str__(self) -> str:
        return self.name


class AgentTool(models.Model):
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="agent_tools")
    tool = models.ForeignKey("tools_app.Tool", on_delete=models.CASCADE, related_name="agent_links")
    allowed_functions = models.JSONField(null=True, blank=True, help_text="null = all functions")
    requires_approval = models.BooleanField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "tool"], name="uniq_agent_tool")]


class ConversationStatus(models.TextChoices):
    IDLE = "idle", "Idle"
    RUNNING = "running", "Running"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"


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


class Message(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16)
    content = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
