"""Admin access by tenant role, and the admin's tenant context.

Django's model permissions are not used for tenant staff: the membership role decides. The admin works
in one tenant at a time, the *current tenant* (kept in the session, switched from the header): every
admin built on these mixins lists, filters, offers in selects and autocompletes, and opens only that
tenant's objects (plus global market sources). Superusers switch among all tenants; others among the
tenants they own or administer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from core.errors import DomainError
from tenants_app.models import Tenant
from tenants_app.selectors import last_used_membership, tenants_for_admin
from tenants_app.services import membership_mark_used

SESSION_KEY = "toolhub_admin_tenant"
# The tenant last switched to, kept across sign-ins in this browser (signed; only ever honoured for a tenant
# the signed-in user manages, so it reveals and grants nothing).
COOKIE = "toolhub_admin_tenant"
COOKIE_SALT = "toolhub.admin.tenant"
COOKIE_MAX_AGE = 365 * 24 * 3600


def current_tenant(request: HttpRequest) -> Tenant | None:
    """The tenant this admin session works in: the one chosen in this session (if still allowed), else the one
    the user last worked in (their membership remembers it, in any browser; this browser's cookie for tenants
    a superuser manages without a membership), else the first by slug."""
    if hasattr(request, "_toolhub_admin_tenant"):
        return cast("Tenant | None", request._toolhub_admin_tenant)
    allowed = tenants_for_admin(user=request.user) if request.user.is_authenticated else Tenant.objects.none()
    chosen = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
    tenant: Tenant | None = None
    if chosen is None and request.user.is_authenticated:
        last = last_used_membership(user=request.user, tenants=allowed)  # among `allowed`, its tenant loaded
        tenant = last.tenant if last is not None else None
    if chosen is None and tenant is None:
        remembered = request.get_signed_cookie(COOKIE, default=None, salt=COOKIE_SALT, max_age=COOKIE_MAX_AGE)
        chosen = int(remembered) if isinstance(remembered, str) and remembered.isdigit() else None
    if tenant is None and isinstance(chosen, int):
        tenant = allowed.filter(pk=chosen).first()
    if tenant is None:
        # Not stored: the default costs the same query each time, and no page view has to write the session.
        tenant = allowed.order_by("slug").first()
    request._toolhub_admin_tenant = tenant  # type: ignore[attr-defined]
    return tenant


def switch_tenant(request: HttpRequest, tenant_id: Any) -> Tenant | None:
    """Make `tenant_id` the current tenant if the user may manage it; None (nothing changed) otherwise."""
    try:
        pk = int(tenant_id)
    except (TypeError, ValueError):
        return None
    tenant = tenants_for_admin(user=request.user).filter(pk=pk).first()
    if tenant is not None:
        request.session[SESSION_KEY] = tenant.pk
        request._toolhub_admin_tenant = tenant  # type: ignore[attr-defined]
        membership_mark_used(tenant=tenant, actor=request.user)
    return tenant


def current_tenants(request: HttpRequest) -> QuerySet[Tenant]:
    """The current tenant as a queryset (empty when the user manages none): for `tenant` selects."""
    tenant = current_tenant(request)
    return Tenant.objects.filter(pk=tenant.pk) if tenant is not None else Tenant.objects.none()


def tenant_path(model: type[models.Model]) -> tuple[str, bool] | None:
    """How `model` reaches its tenant: ("tenant", nullable) or ("<fk>__tenant", nullable), one hop at most.

    A nullable tenant means "global" (market sources): those rows are shown in every tenant.
    """
    if model is Tenant:
        return None
    for field in model._meta.fields:
        if field.name == "tenant" and field.many_to_one and field.related_model is Tenant:
            return "tenant", bool(field.null)
    for field in model._meta.fields:
        related = field.related_model if field.many_to_one else None
        if related is None or related is Tenant:
            continue
        for inner in related._meta.fields:
            if inner.name == "tenant" and inner.many_to_one and inner.related_model is Tenant:
                return f"{field.name}__tenant", bool(inner.null)
    return None


def scope_to_current(request: HttpRequest, qs: QuerySet[Any]) -> QuerySet[Any]:
    """`qs` narrowed to the current tenant (and global rows where the tenant may be null)."""
    path = tenant_path(qs.model)
    if path is None:
        return qs
    field, nullable = path
    tenant = current_tenant(request)
    where = Q(**{field: tenant}) if tenant is not None else Q(pk__in=[])
    if nullable:
        where |= Q(**{f"{field}__isnull": True})
    return qs.filter(where)


def manages_any_tenant(request: HttpRequest) -> bool:
    user = request.user
    if not (user.is_active and user.is_staff):
        return False
    if user.is_superuser:
        return True
    # Asked once per model admin on every page (index, sidebar): answered once per request.
    if not hasattr(request, "_toolhub_manages_any"):
        request._toolhub_manages_any = tenants_for_admin(user=user).exists()  # type: ignore[attr-defined]
    return bool(request._toolhub_manages_any)  # type: ignore[attr-defined]


class TenantRoleAdminMixin:
    """Grants view/add/change/delete to tenant owners/admins, and keeps every page in the current tenant.

    Querysets (lists, change pages, history, autocompletes, actions), foreign-key selects and related
    list filters are narrowed to the current tenant here, beneath whatever a subclass adds; the
    tenant column and "by tenant" filter are dropped, since the header already says which tenant it is.
    """

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return scope_to_current(request, super().get_queryset(request))  # type: ignore[misc]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        related = db_field.related_model
        if related is Tenant:
            kwargs["queryset"] = current_tenants(request)
            kwargs.setdefault("initial", current_tenant(request))
            if db_field.null and request.user.is_superuser:
                kwargs.setdefault("empty_label", "(global: every tenant)")  # e.g. a global market source
            else:
                kwargs.setdefault("empty_label", None)
                # One possible value, named in the header beside the switcher: no second tenant select here.
                kwargs["widget"] = forms.HiddenInput()
        elif tenant_path(related) is not None:
            base = kwargs.get("queryset")
            kwargs["queryset"] = scope_to_current(request, base if base is not None else related._default_manager.all())
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)  # type: ignore[misc]
        return [name for name in shown if name != "tenant"] or shown

    def get_list_filter(self, request: HttpRequest) -> Any:
        kept: list[Any] = []
        for item in super().get_list_filter(request):  # type: ignore[misc]
            if isinstance(item, type) and getattr(item, "is_tenant_filter", False):
                continue
            if isinstance(item, str) and self._is_fk(item):
                # A plain related filter would list every tenant's objects; related-only lists what is shown.
                item = (item, admin.RelatedOnlyFieldListFilter)
            kept.append(item)
        return kept

    def _is_fk(self, name: str) -> bool:
        try:
            field = self.model._meta.get_field(name)  # type: ignore[attr-defined]
        except FieldDoesNotExist:
            return False
        return bool(getattr(field, "many_to_one", False) or getattr(field, "many_to_many", False))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return manages_any_tenant(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return manages_any_tenant(request)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return manages_any_tenant(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return manages_any_tenant(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return manages_any_tenant(request)


class AdminAbort(Exception):
    """Raised inside save/delete hooks after a service refused; the change view rolls back and reloads."""


class ServiceAdminMixin(TenantRoleAdminMixin):
    """Admins that write through services: a DomainError never becomes a 500, and never loses what was typed.

    A refusal inside the add/change form (save_model, save_related) rolls the whole save back, then the
    same POST is validated again with the refusal added as a form error: the page comes back with every
    value and inline row as typed and the message at the field the service named (`details["field"]`,
    renamed through `service_error_fields` where the form calls it something else). Elsewhere (delete,
    actions) the refusal is an error message.
    """

    # The service's `details["field"]` -> this admin's form field, where the names differ.
    service_error_fields: dict[str, str] = {}
    # The first part of the service's field -> the prefix of the inline whose rows it is about.
    service_error_inlines: dict[str, str] = {}

    def call_service(self, request: HttpRequest, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        try:
            return fn(actor=request.user, **kwargs)
        except DomainError as exc:
            if getattr(request, "_toolhub_in_changeform", False):
                request._toolhub_refusal = exc  # type: ignore[attr-defined]
            else:
                self.message_user(request, f"Not saved: {exc.message}", messages.ERROR)  # type: ignore[attr-defined]
            raise AdminAbort() from None

    def refusal_field(self, form: Any, exc: DomainError) -> str | None:
        """The form field a refusal belongs to, or None for the form as a whole."""
        field = str((exc.details or {}).get("field") or "")
        name = self.service_error_fields.get(field, field)
        return name if name in form.fields else None

    def refusal_inline(self, exc: DomainError) -> str | None:
        """The prefix of the inline a refusal is about, or None when it belongs to the main form."""
        field = str((exc.details or {}).get("field") or "")
        return self.service_error_inlines.get(field.split(".", 1)[0])

    def refusal_row(self, formset: Any, exc: DomainError) -> tuple[int, str | None] | None:
        """(row index, field) of the inline row a refusal is about; None puts it above the inline's rows."""
        return None

    def get_formsets_with_inlines(self, request: HttpRequest, obj: Any = None) -> Any:
        refusal: DomainError | None = getattr(request, "_toolhub_refusal", None)
        target = self.refusal_inline(refusal) if refusal is not None else None
        admin_ = self
        for formset_class, inline in super().get_formsets_with_inlines(request, obj):  # type: ignore[misc]
            if target is None or formset_class.get_default_prefix() != target:
                yield formset_class, inline
                continue

            class RefusedFormSet(formset_class):  # type: ignore[misc,valid-type]
                def clean(self) -> None:
                    super().clean()
                    row = admin_.refusal_row(self, refusal)  # type: ignore[arg-type]
                    if row is None:
                        raise ValidationError(refusal.message)  # type: ignore[union-attr]
                    self.forms[row[0]].add_error(row[1], refusal.message)  # type: ignore[union-attr]

            yield RefusedFormSet, inline

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form_class = super().get_form(request, obj, change, **kwargs)  # type: ignore[misc]
        refusal: DomainError | None = getattr(request, "_toolhub_refusal", None)
        if refusal is None or self.refusal_inline(refusal) is not None:
            return form_class
        admin_, refused = self, refusal

        class RefusedForm(form_class):  # type: ignore[misc,valid-type]
            def clean(self) -> Any:
                cleaned = super().clean()
                self.add_error(admin_.refusal_field(self, refused), refused.message)
                return cleaned

        RefusedForm.__name__ = form_class.__name__
        return RefusedForm

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        request._toolhub_in_changeform = True  # type: ignore[attr-defined]
        try:
            return cast(HttpResponse, super().changeform_view(request, *args, **kwargs))  # type: ignore[misc]
        except AdminAbort:
            if getattr(request, "_toolhub_refusal", None) is None:
                return HttpResponseRedirect(request.get_full_path())
            # Rolled back; this pass sees the refusal as a form error, so it renders the POST and saves nothing.
            return cast(HttpResponse, super().changeform_view(request, *args, **kwargs))  # type: ignore[misc]
        finally:
            request._toolhub_in_changeform = False  # type: ignore[attr-defined]

    def delete_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return cast(HttpResponse, super().delete_view(request, *args, **kwargs))  # type: ignore[misc]
        except AdminAbort:
            return HttpResponseRedirect(request.get_full_path())


class ReadOnlyAdminMixin(TenantRoleAdminMixin):
    """Visible to the tenant's owners/admins, never written from the admin (audit logs, catalog entries)."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def tenant_filter(field_path: str = "tenant") -> type[admin.SimpleListFilter]:
    """A "by tenant" list filter that offers only the tenants the viewer manages (never other tenants' names)."""

    class TenantFilter(admin.SimpleListFilter):
        # The admin works in one tenant at a time: TenantRoleAdminMixin drops this filter from its lists.
        is_tenant_filter = True
        title = "tenant"
        parameter_name = f"{field_path}__id__exact"

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[Any, str]]:
            return [(t.pk, t.slug) for t in tenants_for_admin(user=request.user).order_by("slug")]

        def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
            value = self.value()
            if not value:
                return queryset
            if not str(value).isdigit():
                return queryset.none()
            return queryset.filter(**{f"{field_path}__id": int(value)})

    return TenantFilter


def person(field: str, description: str) -> Callable[[Any, Any], str]:
    """A readonly user field shown as the username, not a link: a tenant admin cannot open Django's user admin,
    so the link a readonly foreign key gets answered 403. Use as `<field>_name = person("<field>", "...")` and
    list `<field>_name` in the admin's fields."""

    @admin.display(description=description, ordering=field)
    def shown(model_admin: Any, obj: Any) -> str:
        user = getattr(obj, field, None)
        return str(user) if user is not None else "-"

    shown.__name__ = f"{field}_name"
    return shown
