"""Company sign-in in the admin: the tenant's identity providers (client secret write-only) and the audit of
sign-ins, failed sign-ins, role changes and SCIM operations."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from core.secrets import KEEP
from identity_app import oidc, services
from identity_app.models import IdentityEvent, IdentityProvider
from tenants_app.admin_scoping import ReadOnlyAdminMixin, ServiceAdminMixin

_ProviderForm = forms.ModelForm[IdentityProvider]
_ProviderAdmin = admin.ModelAdmin[IdentityProvider]
_EventAdmin = admin.ModelAdmin[IdentityEvent]


class ProviderForm(_ProviderForm):
    issuer = forms.CharField(max_length=500, help_text="The issuer URL (discovery at <issuer>/.well-known/...)")
    client_secret = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                                    help_text="Write-only: blank keeps the stored secret.")
    email_domains = forms.CharField(required=False, help_text="Comma-separated, e.g. acme.com, acme.co.uk")
    role_map = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}),
                               help_text='JSON: {"group": "owner|admin|member|viewer"}')

    class Meta:
        model = IdentityProvider
        fields = ["tenant", "name", "issuer", "client_id", "client_secret", "email_domains", "groups_claim",
                  "role_map", "enforced"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["email_domains"] = ", ".join(self.instance.email_domains)
            self.initial["role_map"] = json.dumps(self.instance.role_map, indent=1)
            self.initial["client_secret"] = ""

    def clean_email_domains(self) -> list[str]:
        return [d.strip() for d in str(self.cleaned_data.get("email_domains") or "").split(",") if d.strip()]

    def clean_role_map(self) -> Any:
        raw = str(self.cleaned_data.get("role_map") or "").strip()
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise forms.ValidationError('not JSON; e.g. {"Toolhub Admins": "admin"}') from None

    def _post_clean(self) -> None:
        # The service validates and writes; the model form must not put the plain secret on the instance.
        pass


@admin.register(IdentityProvider)
class IdentityProviderAdmin(ServiceAdminMixin, _ProviderAdmin):
    form = ProviderForm
    list_display = ["name", "issuer", "client_id", "enforced", "updated_at"]
    readonly_fields = ["redirect_uri"]

    @admin.display(description="Redirect URI (register it at the provider)")
    def redirect_uri(self, obj: IdentityProvider) -> str:
        return oidc.redirect_uri()

    def save_model(self, request: HttpRequest, obj: IdentityProvider, form: Any, change: bool) -> None:
        data = form.cleaned_data
        fields = services.ProviderInput(
            name=data["name"], issuer=data["issuer"], client_id=data["client_id"],
            client_secret=data.get("client_secret") or KEEP, email_domains=data["email_domains"],
            groups_claim=data.get("groups_claim") or "groups", role_map=data["role_map"], enforced=data["enforced"])
        if change:
            saved = self.call_service(request, services.provider_update, tenant=obj.tenant, provider_id=obj.pk,
                                      changes=fields)
        else:
            saved = self.call_service(request, services.provider_create, tenant=data["tenant"], data=fields)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: IdentityProvider) -> None:
        self.call_service(request, services.provider_delete, tenant=obj.tenant, provider_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[IdentityProvider]) -> None:
        for provider in queryset:
            self.delete_model(request, provider)


@admin.register(IdentityEvent)
class IdentityEventAdmin(ReadOnlyAdminMixin, _EventAdmin):
    # The provider's subject is on each event's page (and searchable): eight columns clipped the list at 1280 px.
    list_display = ["created_at", "kind", "username", "provider", "role", "actor", "message"]
    list_filter = ["kind", "provider"]
    search_fields = ["username", "subject", "message"]
    # The person by username, not the user row: Django's user admin is the operators', and a tenant admin following
    # a link to it would be refused.
    fields = ["created_at", "kind", "provider", "subject", "username", "actor", "role", "message", "details"]
