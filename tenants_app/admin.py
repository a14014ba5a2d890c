"""Admin for tenants and memberships: tenant staff see only their own tenants, and every write is a service call."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from core.errors import DomainError
from tenants_app import services
from tenants_app.admin_scoping import ServiceAdminMixin, person, tenant_filter
from tenants_app.models import Membership, Role, Tenant
from tenants_app.selectors import tenants_for_admin

# Generic in their model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_TenantForm = forms.ModelForm[Tenant]
_TenantAdmin = admin.ModelAdmin[Tenant]
_MembershipForm = forms.ModelForm[Membership]
_MembershipAdmin = admin.ModelAdmin[Membership]

# What each LOCAL network exposes to the tenant's own code (docs/security.md); `host` is shown in red.
NETWORK_EXPOSES = {
    "none": "No network at all: the servers reach nothing, not even loopback.",
    "public": "The internet only, through a user-mode network stack: never loopback, this host's addresses, private, "
              "link-local or cloud-metadata ranges, whatever DNS answers.",
    "host": "THE HOST'S NETWORK: the servers reach everything this host reaches, its loopback services included - "
            "Redis, PostgreSQL, the LOCAL server runners, the web processes, the cloud metadata service and the "
            "private network. Only for a tenant you trust with the deployment's back end.",
}

TENANT_FORM_FIELDS = ["slug", "name", "is_active", "admins_can_approve", "approval_second_person",
                      "gateway_approvals_in_toolhub_only", "allow_imported_auto_approve", "tool_screen", "approve_after_flagged_result", "command_interpreters", "sql_allowed_tables", "local_network",
                      "local_memory_mb"]


class NamesField(forms.CharField):
    """A list of names, one per line (blank lines and surrounding spaces dropped)."""

    def __init__(self, *, empty: list[str] | None, **kwargs: Any) -> None:
        self.empty = empty
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 3, "cols": 40, "spellcheck": "false"}))
        super().__init__(required=False, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(str(v) for v in value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str] | None:  # type: ignore[override]
        names = [line.strip() for line in str(value or "").splitlines() if line.strip()]
        return names or self.empty


class TenantAdminForm(_TenantForm):
    """Tenant policy as plain fields: lists of names one per line, never raw JSON."""

    command_interpreters = NamesField(
        empty=[], label="Command interpreters",
        help_text="Interpreters execute_command may run for this tenant, one per line (e.g. python3); "
                  "empty: none (explicit opt-in).")
    sql_allowed_tables = NamesField(
        empty=None, label="SQL allowed tables",
        help_text="Tables the SQL built-ins may read, one per line; empty: the platform's "
                  "TOOLHUB_SQL_ALLOWED_TABLES.")

    class Meta:
        model = Tenant
        fields = TENANT_FORM_FIELDS


@admin.register(Tenant)
class TenantAdmin(ServiceAdminMixin, _TenantAdmin):
    form = TenantAdminForm
    list_display = ["slug", "name", "is_active", "created_at"]
    search_fields = ["slug", "name"]
    list_filter = ["is_active"]
    fields = (*TENANT_FORM_FIELDS, "network_exposes", "members")

    @admin.display(description="What the LOCAL network exposes")
    def network_exposes(self, obj: Tenant) -> str:
        text = NETWORK_EXPOSES.get(obj.local_network, "")
        if obj.local_network == "host":
            return format_html('<strong class="toolhub-host-network" style="color: #ba2121">{}</strong>', text)
        return format_html("{}", text)

    @admin.display(description="Members")
    def members(self, obj: Tenant) -> str:
        # Read-only here: members are added and re-roled on the Membership page, through the services.
        rows = obj.memberships.select_related("user").order_by("user__username")
        return ", ".join(f"{m.user.username} ({m.role})" for m in rows) or "-"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        return tenants_for_admin(user=request.user)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # The form shows only what this viewer may change; the service refuses anything else regardless.
        if request.user.is_superuser:
            return ["network_exposes", "members"]
        if obj is not None and services.actor_role(tenant=obj, actor=request.user) == Role.OWNER:
            return ["is_active", "local_network", "local_memory_mb", "network_exposes", "members"]
        return [*TENANT_FORM_FIELDS, "network_exposes", "members"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        values = {f: form.cleaned_data[f] for f in form.changed_data if f in services.TENANT_FIELDS}
        if change:
            stored = Tenant.objects.get(pk=obj.pk)
            saved = self.call_service(request, services.tenant_update, tenant=stored, changes=values)
        else:
            saved = self.call_service(request, services.tenant_create, slug=values.pop("slug", ""),
                                      name=values.pop("name", ""))
            values.pop("is_active", None)
            if values:
                saved = self.call_service(request, services.tenant_update, tenant=saved, changes=values)
        obj.pk, obj._state.adding = saved.pk, False


class MembershipAddForm(_MembershipForm):
    """Adding a member names an existing user by username: no picker lists (or reveals) other users."""

    username = forms.CharField(max_length=150, help_text="The username of an existing account.")

    class Meta:
        model = Membership
        fields = ["tenant", "role"]


class MembershipChangeForm(_MembershipForm):
    class Meta:
        model = Membership
        fields = ["role"]


@admin.register(Membership)
class MembershipAdmin(ServiceAdminMixin, _MembershipAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", tenant_filter()]
    search_fields = ["user__username", "tenant__slug"]
    user_name = person("user", "User")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        return (super().get_queryset(request).filter(tenant__in=tenants_for_admin(user=request.user))
                .select_related("user", "tenant"))

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        kwargs["form"] = MembershipChangeForm if obj is not None else MembershipAddForm
        kwargs["fields"] = None
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["tenant", "user_name", "role"] if obj is not None else ["tenant", "username", "role"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["tenant", "user_name"] if obj is not None else []

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenants_for_admin(user=request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        if change:
            saved = self.call_service(request, services.membership_set_role, tenant=obj.tenant,
                                      membership_id=obj.pk, role=form.cleaned_data["role"])
        else:
            saved = self.call_service(request, services.membership_add, tenant=form.cleaned_data["tenant"],
                                      username=form.cleaned_data["username"], role=form.cleaned_data["role"])
        obj.pk, obj.user, obj.role, obj._state.adding = saved.pk, saved.user, saved.role, False

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        self.call_service(request, services.membership_remove, tenant=obj.tenant, membership_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        for membership in list(queryset.select_related("tenant", "user")):
            try:
                services.membership_remove(tenant=membership.tenant, actor=request.user, membership_id=membership.pk)
            except DomainError as exc:
                self.message_user(request, f"{membership.user} not removed: {exc.message}", messages.ERROR)
