"""The intent tree in the admin: nodes listed as an indented tree, examples inline, writes through services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from agents_app.admin.base import PickedNames, ServiceAdmin
from agents_app.models import IntentExample, IntentNode
from agents_app.services import intents as services
from tenants_app.admin_scoping import TenantRoleAdminMixin, current_tenant, tenant_filter
from tenants_app.models import Tenant
from tenants_app.selectors import tenants_for_admin
from tools_app.models import FunctionState, ToolFunction

# Generic in their model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_IntentExampleInline = admin.TabularInline[IntentExample, IntentNode]
_IntentNodeForm = forms.ModelForm[IntentNode]


class IntentExampleInline(TenantRoleAdminMixin, _IntentExampleInline):
    model = IntentExample
    extra = 3
    fields = ["text", "position", "embedded"]
    readonly_fields = ["embedded"]

    @admin.display(description="Embedded", boolean=True)
    def embedded(self, obj: IntentExample) -> bool:
        return bool(obj.pk and obj.embedding)


class IntentNodeForm(_IntentNodeForm):
    # Ticked from the tenant's known functions; the service checks every ref, and an unknown one comes back here.
    function_refs = PickedNames(
        label="Functions", required=False, widget=forms.CheckboxSelectMultiple(attrs={"class": "toolhub-fn-picker"}),
        help_text="The functions this intent offers, as <code>&lt;tool&gt;__&lt;function&gt;</code>, of this tenant's tools.",
    )
    refs_tenant: Tenant | None = None  # set by the admin: whose functions to offer

    class Meta:
        model = IntentNode
        fields = ["tenant", "code", "name", "level", "kind", "description", "parent", "status"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored: list[str] = []
        if self.instance.pk:
            stored = sorted(f"{f.tool.name}__{f.name}" for f in self.instance.functions.select_related("tool"))
            self.fields["function_refs"].initial = stored
        keep = self.data.getlist("function_refs") if self.is_bound else stored  # type: ignore[attr-defined]
        tenant = self.instance.tenant if self.instance.pk else self.refs_tenant
        groups: dict[str, list[tuple[str, str]]] = {}
        known: set[str] = set()
        if tenant is not None:
            rows = (ToolFunction.objects.filter(tool__tenant=tenant).exclude(state=FunctionState.REMOVED)
                    .select_related("tool").order_by("tool__name", "name"))
            for fn in rows:
                ref = f"{fn.tool.name}__{fn.name}"
                groups.setdefault(fn.tool.name, []).append((ref, fn.name))
                known.add(ref)
        unknown = [(ref, ref) for ref in keep if ref not in known]
        # A tool whose one function carries its own name (the built-ins) needs no group of its own.
        single = [items[0] for tool, items in groups.items() if len(items) == 1 and items[0][1] == tool]
        choices: list[Any] = [(tool, items) for tool, items in groups.items()
                              if not (len(items) == 1 and items[0][1] == tool)]
        if single:
            choices.append(("built-in and single-function tools", single))
        if unknown:
            choices.append(("not a known function", unknown))
        self.fields["function_refs"].choices = choices  # type: ignore[attr-defined]


@admin.register(IntentNode)
class IntentNodeAdmin(ServiceAdmin):
    form = IntentNodeForm
    change_form_template = "admin/agents_app/intentnode/change_form.html"
    service_error_fields = {"functions": "function_refs"}
    service_error_inlines = {"examples": "examples"}
    list_display = ["tree", "tenant", "level", "kind", "status", "version", "example_count", "updated_at"]
    list_filter = [tenant_filter(), "level", "kind", "status"]
    search_fields = ["code", "name", "description"]
    readonly_fields = ["version"]
    inlines = [IntentExampleInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related("parent__parent").prefetch_related("examples")

    # Grandparent, parent, then own code: with Ragent-style codes (domain-category-topic) this reads as a tree.
    ordering = ["tenant", "parent__parent__code", "parent__code", "code"]

    @admin.display(description="Intent")
    def tree(self, obj: IntentNode) -> str:
        depth, up, seen = 0, obj.parent, {obj.pk}
        while up is not None and up.pk not in seen:
            depth += 1
            seen.add(up.pk)
            up = up.parent
        return f"{'— ' * depth}{obj.name} [{obj.code}]"

    @admin.display(description="Examples")
    def example_count(self, obj: IntentNode) -> int:
        return len(obj.examples.all())

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "parent":
            kwargs["queryset"] = IntentNode.objects.filter(tenant__in=tenants_for_admin(user=request.user))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form_class = super().get_form(request, obj, change, **kwargs)
        return type(form_class.__name__, (form_class,), {"refs_tenant": current_tenant(request)})

    def _input(self, form: Any) -> services.IntentInput:
        data = form.cleaned_data
        refs = [ref.strip() for ref in data.get("function_refs") or [] if ref.strip()]
        parent = data.get("parent")
        return services.IntentInput(code=data["code"], name=data["name"], level=data.get("level"),
                                    kind=data.get("kind"), description=data.get("description", ""),
                                    parent=parent.pk if parent is not None else None, functions=refs,
                                    status=data.get("status"))

    def save_model(self, request: HttpRequest, obj: IntentNode, form: Any, change: bool) -> None:
        if change:
            saved = self.call_service(request, services.intent_update, tenant=obj.tenant, intent_id=obj.pk,
                                      changes=self._input(form))
        else:
            saved = self.call_service(request, services.intent_create, tenant=form.cleaned_data["tenant"],
                                      data=self._input(form))
        obj.pk = saved.pk
        obj.refresh_from_db()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # The inline's examples go through intent_update, which keeps the vectors of unchanged texts.
        rows: list[tuple[int, str]] = []
        for formset in formsets:
            for f in formset.forms:
                data = getattr(f, "cleaned_data", None) or {}
                if not data or data.get("DELETE") or not (data.get("text") or "").strip():
                    continue
                rows.append((int(data.get("position") or 0), data["text"]))
        node = form.instance
        self.call_service(request, services.intent_update, tenant=node.tenant, intent_id=node.pk,
                          changes=services.IntentInput(examples=[t for _, t in sorted(rows, key=lambda r: r[0])]))

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        return super().construct_change_message(request, form, [], add)

    def _delete(self, request: HttpRequest, obj: Any) -> None:
        self.call_service(request, services.intent_delete, tenant=obj.tenant, intent_id=obj.pk)
