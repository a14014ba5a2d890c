"""Agents admin: tenant-scoped, API keys write-only, writes through services, conversations read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from agents_app import services
from agents_app.gateway.configs import client_configs
from agents_app.models import Agent, AgentTool, ChatModel, Conversation, Message
from tenants_app.admin_scoping import (
    AdminAbort,
    ReadOnlyAdminMixin,
    ServiceAdminMixin,
    TenantRoleAdminMixin,
    tenant_filter,
)
from tenants_app.selectors import tenants_for_admin
from tools_app.models import Tool


class _ServiceAdmin(ServiceAdminMixin, admin.ModelAdmin):
    """Scoped to the tenants the user administers; a service error becomes a message, not a 500."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenants_for_admin(user=request.user)
        elif db_field.name == "model":
            kwargs["queryset"] = ChatModel.objects.filter(tenant__in=tenants_for_admin(user=request.user))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*self.readonly_fields, "tenant"] if obj is not None else list(self.readonly_fields)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._delete(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset:
            try:
                self._delete(request, obj)
            except AdminAbort:
                continue

    def _delete(self, request: HttpRequest, obj: Any) -> None:
        raise NotImplementedError


class ChatModelAdminForm(forms.ModelForm):
    """`api_key` is write-only: the field starts blank and blank keeps the stored key."""

    api_key_input = forms.CharField(
        label="API key", required=False, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave blank to keep the stored key.",
    )
    clear_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    base_url = forms.URLField(max_length=500, assume_scheme="https")

    class Meta:
        model = ChatModel
        fields = ["tenant", "name", "base_url", "model", "params"]


@admin.register(ChatModel)
class ChatModelAdmin(_ServiceAdmin):
    form = ChatModelAdminForm
    list_display = ["name", "tenant", "base_url", "model", "key_set"]
    list_filter = [tenant_filter()]
    search_fields = ["name", "model", "base_url"]

    @admin.display(description="API key", boolean=True)
    def key_set(self, obj: ChatModel) -> bool:
        return bool(obj.api_key)

    def save_model(self, request: HttpRequest, obj: ChatModel, form: Any, change: bool) -> None:
        data = form.cleaned_data
        key: Any = services.KEEP
        if data.get("clear_api_key"):
            key = None
        elif data.get("api_key_input"):
            key = data["api_key_input"]
        changes = services.ChatModelInput(name=data["name"], base_url=data["base_url"], model=data["model"],
                                          api_key=key, params=data.get("params") or {})
        if change:
            saved = self.call_service(request, services.chat_model_update, tenant=obj.tenant, model_id=obj.pk, changes=changes)
        else:
            saved = self.call_service(request, services.chat_model_create, tenant=data["tenant"], data=changes)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def _delete(self, request: HttpRequest, obj: Any) -> None:
        self.call_service(request, services.chat_model_delete, tenant=obj.tenant, model_id=obj.pk)


class AgentToolInline(TenantRoleAdminMixin, admin.TabularInline):
    model = AgentTool
    extra = 1
    fields = ["tool", "allowed_functions", "requires_approval"]
    autocomplete_fields = ["tool"]  # a search box, not a select of every tool (scoped to the current tenant)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tool":
            kwargs["queryset"] = Tool.objects.filter(tenant__in=tenants_for_admin(user=request.user)).order_by("name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Agent)
class AgentAdmin(_ServiceAdmin):
    list_display = ["name", "tenant", "model", "status", "max_steps", "updated_at"]
    list_filter = [tenant_filter(), "status"]
    search_fields = ["name", "description"]
    fields = ["tenant", "name", "description", "system_prompt", "model", "max_steps", "status"]
    inlines = [AgentToolInline]
    change_form_template = "admin/agents_app/agent/change_form.html"

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> Any:
        """Show the agent's MCP gateway endpoint and ready-to-paste client configs."""
        agent = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if agent is not None:
            context["mcp"] = client_configs(base_url=request.build_absolute_uri("/"), tenant_slug=agent.tenant.slug,
                                            agent_id=agent.pk, agent_name=agent.name)
        return super().change_view(request, object_id, form_url, extra_context=context)

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        data = form.cleaned_data
        model = data.get("model")
        changes = services.AgentInput(
            name=data["name"], description=data.get("description", ""), system_prompt=data.get("system_prompt", ""),
            model=model.pk if model is not None else None, max_steps=data.get("max_steps"), status=data.get("status"),
        )
        if change:
            saved = self.call_service(request, services.agent_update, tenant=obj.tenant, agent_id=obj.pk, changes=changes)
        else:
            saved = self.call_service(request, services.agent_create, tenant=data["tenant"], data=changes)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # The inline's rows go through agent_update too: one tool of another tenant fails the whole write.
        links: list[services.ToolLink] = []
        for formset in formsets:
            for f in formset.forms:
                data = getattr(f, "cleaned_data", None) or {}
                if not data or data.get("DELETE") or data.get("tool") is None:
                    continue
                allowed = data.get("allowed_functions")
                links.append(services.ToolLink(tool=data["tool"].pk,
                                               allowed_functions=list(allowed) if isinstance(allowed, list) else None,
                                               requires_approval=data.get("requires_approval")))
        agent = form.instance
        self.call_service(request, services.agent_update, tenant=agent.tenant, agent_id=agent.pk,
                   changes=services.AgentInput(tools=links))

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        # The inline's rows were written by agent_update, not by the formsets, which hold no saved objects.
        return super().construct_change_message(request, form, [], add)

    def _delete(self, request: HttpRequest, obj: Any) -> None:
        self.call_service(request, services.agent_delete, tenant=obj.tenant, agent_id=obj.pk)


class MessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    fields = ["created_at", "role", "content", "tool_calls", "tool_call_id"]
    readonly_fields = ["created_at", "role", "content", "tool_calls", "tool_call_id"]


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "tenant", "agent", "user", "status", "title", "updated_at"]
    list_filter = [tenant_filter(), "status"]
    search_fields = ["title"]
    fields = ["tenant", "agent", "user", "status", "title", "created_at", "updated_at"]
    readonly_fields = ["tenant", "agent", "user", "status", "title", "created_at", "updated_at"]
    inlines = [MessageInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user))


from agents_app import admin_intents  # noqa: E402,F401  (registers the intent tree's admin)
