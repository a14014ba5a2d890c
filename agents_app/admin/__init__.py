"""Agents admin: tenant-scoped, API keys write-only, writes through services, conversations read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.widgets import AdminRadioSelect
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.html import format_html

from agents_app import services

# Registers the intent tree's admin; keeps only django-oauth-toolkit's clients in the admin.
from agents_app.admin import intents, oauth  # noqa: F401
from agents_app.admin.base import PickedNames, ServiceAdmin
from agents_app.gateway.configs import client_configs
from agents_app.gateway.oauth.authorizations import authorization_revoke, authorizations_for_agent
from agents_app.models import Agent, AgentRouting, AgentTool, ChatModel, Conversation, Message
from core.errors import NotFound
from core.links import public_url
from tenants_app.admin_scoping import (
    ReadOnlyAdminMixin,
    TenantRoleAdminMixin,
    person,
    scope_to_current,
    tenant_filter,
)
from tenants_app.selectors import tenants_for_admin
from tools_app import selectors as tool_selectors
from tools_app.models import Tool

# Generic in their model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_ChatModelForm = forms.ModelForm[ChatModel]
_AgentToolForm = forms.ModelForm[AgentTool]
_AgentToolInline = admin.StackedInline[AgentTool, Agent]
_AgentForm = forms.ModelForm[Agent]
_MessageInline = admin.TabularInline[Message, Conversation]
_ConversationAdmin = admin.ModelAdmin[Conversation]


class ChatModelAdminForm(_ChatModelForm):
    """`api_key` is write-only: the field starts blank and blank keeps the stored key."""

    api_key_input = forms.CharField(
        label="API key", required=False, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave blank to keep the stored key.",
    )
    clear_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    base_url = forms.URLField(max_length=500, assume_scheme="https", widget=forms.URLInput(attrs={"size": 70}),
                              help_text="The OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or "
                                        "http://127.0.0.1:11434/v1 (Ollama).")

    class Meta:
        model = ChatModel
        fields = ["tenant", "name", "base_url", "model", "params"]


@admin.register(ChatModel)
class ChatModelAdmin(ServiceAdmin):
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


APPROVAL_CHOICES = [
    ("", "As the tool and its functions say"),
    ("yes", "Always ask: every call from this agent waits for a person"),
    ("no", "Add nothing for this agent (a tool's or function's own rule still asks)"),
]
APPROVAL_VALUES: dict[str, bool | None] = {"": None, "yes": True, "no": False}


def function_choices(tool: Tool | None, keep: list[str] | None = None) -> list[tuple[str, str]]:
    """The tool's known functions as picker choices; names already stored stay listed even if now unknown."""
    choices: list[tuple[str, str]] = []
    seen: set[str] = set()
    if tool is not None:
        for fn in tool.functions.all().order_by("name"):
            note = {"CHANGED": " (awaiting approval)", "REMOVED": " (no longer offered)"}.get(fn.state, "")
            choices.append((fn.name, f"{fn.name}{note}"))
            seen.add(fn.name)
    choices += [(name, f"{name} (unknown)") for name in keep or [] if name not in seen]
    return choices


class AgentToolForm(_AgentToolForm):
    """A link: the tool, which of its functions (all, or a ticked few) and whether calls need approval."""

    functions_mode = forms.ChoiceField(
        label="Functions", initial="all", widget=AdminRadioSelect(attrs={"class": "radiolist inline"}),
        choices=[("all", "All functions (also ones the server adds later)"), ("only", "Only the ticked functions")],
    )
    functions = PickedNames(label="Allowed functions", required=False, widget=forms.CheckboxSelectMultiple(
        attrs={"class": "toolhub-fn-picker"}))
    approval = forms.ChoiceField(label="Requires approval", required=False, choices=APPROVAL_CHOICES,
                                 widget=AdminRadioSelect(attrs={"class": "radiolist"}))

    class Meta:
        model = AgentTool
        fields = ["tool"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        link: AgentTool = self.instance
        stored = link.allowed_functions if link.pk else None
        if link.pk:
            self.initial.setdefault("functions_mode", "all" if stored is None else "only")
            self.initial.setdefault("functions", list(stored or []))
            self.initial.setdefault("approval", {True: "yes", False: "no"}.get(link.requires_approval, ""))  # type: ignore[arg-type]
        tool_id = self.data.get(self.add_prefix("tool")) if self.is_bound else link.tool_id if link.pk else None
        tool = None
        if tool_id and str(tool_id).isdigit():
            tool = self.fields["tool"].queryset.filter(pk=int(tool_id)).first()  # type: ignore[attr-defined]
        keep = self.data.getlist(self.add_prefix("functions")) if self.is_bound else list(stored or [])  # type: ignore[attr-defined]
        self.fields["functions"].choices = function_choices(tool, keep)  # type: ignore[attr-defined]
        self.fields["functions"].widget.attrs["data-tool"] = str(tool.pk) if tool is not None else ""

    def link(self) -> services.ToolLink:
        data = self.cleaned_data
        only = data.get("functions_mode") == "only"
        return services.ToolLink(tool=data["tool"].pk, allowed_functions=list(data.get("functions") or []) if only
                                 else None, requires_approval=APPROVAL_VALUES.get(data.get("approval") or "", None))


class AgentToolInline(TenantRoleAdminMixin, _AgentToolInline):
    model = AgentTool
    form = AgentToolForm
    extra = 1
    fields = ["tool", "functions_mode", "functions", "approval"]
    autocomplete_fields = ["tool"]  # a search box, not a select of every tool (scoped to the current tenant)
    verbose_name = "tool"
    verbose_name_plural = "Tools this agent may call"

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tool":
            kwargs["queryset"] = Tool.objects.filter(tenant__in=tenants_for_admin(user=request.user)).order_by("name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class AgentAdminForm(_AgentForm):
    """The agent, with its intent routing settings (the same fields the API takes)."""

    routing = forms.ChoiceField(choices=AgentRouting.choices, initial=AgentRouting.ALL, label="Routing",
                                widget=AdminRadioSelect(attrs={"class": "radiolist inline"}))
    routing_threshold = forms.FloatField(
        required=False, min_value=0.0, max_value=1.0, label="Routing threshold",
        help_text="0–1; blank uses the platform default (TOOLHUB_INTENT_THRESHOLD).")
    knowledge_function = forms.CharField(
        required=False, max_length=200, label="Knowledge function",
        help_text="<code>&lt;tool&gt;__&lt;function&gt;</code> that searches documents for KB intents.")
    tool_search = forms.ChoiceField(
        choices=[("auto", "auto (on from 40 functions)"), ("on", "on"), ("off", "off")], initial="auto", required=False,
        label="Tool search", help_text="Gateway clients list <code>search_functions</code> and <code>call</code> "
        "(and the most used functions) instead of every function.")
    always_on = PickedNames(required=False, label="Always offered", widget=forms.CheckboxSelectMultiple(
        attrs={"class": "toolhub-fn-picker"}), help_text="Functions offered on every turn, whatever the intent.")

    class Meta:
        model = Agent
        fields = ["tenant", "name", "description", "system_prompt", "model", "max_steps", "status"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agent: Agent = self.instance
        if agent.pk:
            self.initial.update(routing=agent.routing, routing_threshold=agent.routing_threshold,
                                knowledge_function=agent.knowledge_function, always_on=list(agent.always_on or []),
                                tool_search=agent.tool_search)
        refs: list[str] = []
        if agent.pk:
            for link in agent.agent_tools.select_related("tool"):
                refs += [f"{link.tool.name}__{fn.name}" for fn in link.tool.functions.exclude(state="REMOVED")
                         if link.allowed_functions is None or fn.name in link.allowed_functions]
        keep = (self.data.getlist("always_on") if self.is_bound  # type: ignore[attr-defined]
                else list(agent.always_on or []) if agent.pk else [])
        self.fields["always_on"].choices = [(r, r) for r in sorted(set(refs) | set(keep))]  # type: ignore[attr-defined]
        if not self.fields["always_on"].choices:  # type: ignore[attr-defined]
            self.fields["always_on"].help_text += " Link tools below and save: their functions are listed here."
        self.fields["knowledge_function"].widget.attrs["list"] = "toolhub-agent-refs"
        self.refs = sorted(refs)


ROUTING_FIELDS: list[Any] = ["routing", "routing_threshold", "knowledge_function", "always_on", "tool_search"]


@admin.register(Agent)
class AgentAdmin(ServiceAdmin):
    form = AgentAdminForm
    list_display = ["name", "tenant", "model_shown", "status", "max_steps", "updated_at"]
    list_filter = [tenant_filter(), "status"]
    search_fields = ["name", "description"]
    fieldsets = [
        (None, {"fields": ["tenant", "name", "description", "system_prompt", "model", "max_steps", "status"]}),
        ("Intent routing", {"fields": ROUTING_FIELDS, "description": (
            "With <b>intent</b> routing each turn offers only the functions of the intents the question matches "
            "(Agents → Intent nodes), plus the ones always offered.")}),
    ]
    inlines = [AgentToolInline]
    change_form_template = "admin/agents_app/agent/change_form.html"
    service_error_inlines = {"tools": "agent_tools"}

    @admin.display(description="Model", ordering="model__name")
    def model_shown(self, obj: Agent) -> str:
        # Without a model an agent chats with TOOLHUB_DEMO_MODEL_URL (the demo model under `make run`), if set.
        if obj.model is not None:
            return obj.model.name
        return "demo model" if settings.TOOLHUB_DEMO_MODEL_URL else "none (chat fails until one is picked)"

    def get_urls(self) -> list[Any]:
        from django.urls import path

        own = [path("tool-functions/<int:tool_id>/", self.admin_site.admin_view(self.tool_functions),
                    name="agents_app_agent_tool_functions"),
               path("<int:agent_id>/revoke-authorization/", self.admin_site.admin_view(self.revoke_authorization),
                    name="agents_app_agent_revoke_authorization")]
        return own + super().get_urls()

    def tool_functions(self, request: HttpRequest, tool_id: int) -> Any:
        """The picker's choices for a tool chosen in a new row (this tenant's tools only; others are 404)."""
        from django.http import Http404, JsonResponse

        if not self.has_change_permission(request):
            raise Http404
        tool = scope_to_current(request, Tool.objects.all()).filter(pk=tool_id).first()
        if tool is None:
            raise Http404
        return JsonResponse({"tool": tool.pk, "functions": [
            {"value": value, "label": label} for value, label in function_choices(tool)]})

    def revoke_authorization(self, request: HttpRequest, agent_id: int) -> Any:
        """Revoke (POST) what one member granted one OAuth client at this agent."""
        from django.contrib import messages
        from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
        from django.urls import reverse

        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent = self.get_object(request, str(agent_id))
        if agent is None or not self.has_change_permission(request, agent):
            raise Http404
        try:
            revoked = authorization_revoke(tenant=agent.tenant, actor=request.user, agent_id=agent.pk,
                                           client_id=request.POST.get("client_id", ""),
                                           user_id=request.POST.get("user_id", ""))
        except NotFound:
            messages.warning(request, "There was nothing left to revoke for that client.")
        else:
            messages.success(request, f"Revoked: the client's {revoked} token(s) for this agent stop working now.")
        return HttpResponseRedirect(reverse("admin:agents_app_agent_change", args=[agent.pk]))

    def refusal_row(self, formset: Any, exc: Any) -> tuple[int, str | None] | None:
        tool_id = (exc.details or {}).get("tool")
        for i, f in enumerate(formset.forms):
            tool = (getattr(f, "cleaned_data", None) or {}).get("tool")
            if tool is not None and tool.pk == tool_id:
                return i, "functions"
        return None

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> Any:
        """Show the agent's MCP gateway endpoint and ready-to-paste client configs."""
        agent = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if agent is not None:
            context["mcp"] = client_configs(base_url=public_url("/", request=request), tenant_slug=agent.tenant.slug,
                                            agent_id=agent.pk, agent_name=agent.name)
            context["oauth_clients"] = authorizations_for_agent(tenant=agent.tenant, agent_id=agent.pk)
        return super().change_view(request, object_id, form_url, extra_context=context)

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        data = form.cleaned_data
        model = data.get("model")
        changes = services.AgentInput(
            name=data["name"], description=data.get("description", ""), system_prompt=data.get("system_prompt", ""),
            model=model.pk if model is not None else None, max_steps=data.get("max_steps"), status=data.get("status"),
            routing=data.get("routing") or None, routing_threshold=data.get("routing_threshold"),
            knowledge_function=data.get("knowledge_function") or "", always_on=list(data.get("always_on") or []),
            tool_search=data.get("tool_search") or None,
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
                links.append(f.link())
        agent = form.instance
        self.call_service(request, services.agent_update, tenant=agent.tenant, agent_id=agent.pk,
                   changes=services.AgentInput(tools=links))

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        # The inline's rows were written by agent_update, not by the formsets, which hold no saved objects.
        return super().construct_change_message(request, form, [], add)

    def _delete(self, request: HttpRequest, obj: Any) -> None:
        self.call_service(request, services.agent_delete, tenant=obj.tenant, agent_id=obj.pk)


class MessageInline(ReadOnlyAdminMixin, _MessageInline):
    model = Message
    extra = 0
    can_delete = False
    fields = ["created_at", "role", "content", "tool_calls", "tool_call_id"]
    readonly_fields = ["created_at", "role", "content", "tool_calls", "tool_call_id"]


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, _ConversationAdmin):
    list_display = ["id", "tenant", "agent", "user", "status", "title", "updated_at"]
    list_filter = [tenant_filter(), "status"]
    search_fields = ["title"]
    fields = ["tenant", "agent", "user_name", "status", "title", "calls", "created_at", "updated_at"]
    readonly_fields = ["tenant", "agent", "user_name", "status", "title", "calls", "created_at", "updated_at"]
    user_name = person("user", "User")
    inlines = [MessageInline]

    @admin.display(description="Tool calls")
    def calls(self, obj: Conversation) -> str:
        """The audit rows of this conversation's calls (held ones link their approval from their own page)."""
        count = tool_selectors.tool_call_list(tenant=obj.tenant).filter(conversation=obj).count()
        if not count:
            return "none"
        return format_html('<a href="{}?conversation__id__exact={}" id="toolhub-conversation-calls">{} call{}</a>',
                           reverse("admin:tools_app_toolcall_changelist"), obj.pk, count, pluralize(count))

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user))
