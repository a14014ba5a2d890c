"""What the agents admin's pages share: the tenant-scoped service admin and the names picker."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from agents_app.models import ChatModel
from tenants_app.admin_scoping import AdminAbort, ServiceAdminMixin
from tenants_app.selectors import tenants_for_admin

# Generic in its model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_AnyModelAdmin = admin.ModelAdmin[Any]


class ServiceAdmin(ServiceAdminMixin, _AnyModelAdmin):
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


class PickedNames(forms.MultipleChoiceField):
    """Checkboxes of known names that leave the judgement to the service: an unknown name is refused there,
    for the admin and the API alike, and the refusal comes back at this field."""

    def valid_value(self, value: str) -> bool:
        return True
