"""Market admin: tenant-scoped sources with write-only auth headers and a Refresh action; entries with Load."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.errors import DomainError
from core.secrets import KEEP, MASK
from market_app import services
from market_app.catalog import suggest_tool_name
from market_app.errors import MissingVariables
from market_app.models import MarketEntry, MarketSource
from tenants_app.admin_scoping import ReadOnlyAdminMixin, ServiceAdminMixin, current_tenant, current_tenants
from tenants_app.models import Tenant
from tenants_app.selectors import tenants_for_admin
from tools_app.models import Tool

# Generic in their model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_SourceForm = forms.ModelForm[MarketSource]
_MarketSourceAdmin = admin.ModelAdmin[MarketSource]
_MarketEntryAdmin = admin.ModelAdmin[MarketEntry]

TO_BE_ENTERED = "(to be entered below)"


def _visible(request: HttpRequest, prefix: str = "") -> Q:
    return Q(**{f"{prefix}tenant__in": tenants_for_admin(user=request.user)}) | Q(**{f"{prefix}tenant__isnull": True})


def counts_line(counts: dict[str, Any]) -> str:
    line = ", ".join(f"{k} {counts.get(k, 0)}" for k in ("added", "updated", "unchanged", "removed"))
    return f"{line}, errors {counts.get('errors_total', len(counts.get('errors', [])))}"


class HeaderRowsWidget(forms.Widget):
    """Auth headers as rows of name and write-only value: each stored header (value never shown; blank keeps it,
    a tick removes it) and a few empty rows to add one. Posted as `<name>-<i>-name|value|remove|stored`."""

    extra = 3

    def __init__(self, stored: list[str] | None = None) -> None:
        super().__init__()
        self.stored = stored or []

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[dict[str, Any]]:
        try:
            total = min(int(data.get(f"{name}-TOTAL", 0)), 50)
        except (TypeError, ValueError):
            total = 0
        rows = []
        for i in range(total):
            rows.append({"name": str(data.get(f"{name}-{i}-name", "")).strip(),
                         "value": str(data.get(f"{name}-{i}-value", "")),
                         "remove": bool(data.get(f"{name}-{i}-remove")),
                         "stored": data.get(f"{name}-{i}-stored") == "1"})
        return rows

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None,
               renderer: Any = None) -> SafeString:
        typed = value if isinstance(value, list) else []
        rows: list[dict[str, Any]] = [{"name": n, "stored": True, "remove": False} for n in self.stored]
        rows += [r for r in typed if not r.get("stored") and r.get("name")]  # names typed in a refused save
        rows += [{"name": "", "stored": False, "remove": False}] * self.extra
        body = []
        for i, row in enumerate(rows):
            prefix = f"{name}-{i}"
            if row["stored"]:
                cells = format_html(
                    '<td><code>{}</code><input type="hidden" name="{}-name" value="{}">'
                    '<input type="hidden" name="{}-stored" value="1"></td>'
                    '<td><input type="password" name="{}-value" autocomplete="new-password" '
                    'class="toolhub-value toolhub-secret" '
                    'placeholder="{} (stored; blank keeps it)" aria-label="New value for {}"></td>'
                    '<td><label><input type="checkbox" name="{}-remove"{}> remove</label></td>',
                    row["name"], prefix, row["name"], prefix, prefix, MASK, row["name"], prefix,
                    " checked" if any(r.get("remove") and r.get("name") == row["name"] for r in typed) else "")
            else:
                cells = format_html(
                    '<td><input type="text" name="{}-name" value="{}" placeholder="e.g. Authorization" '
                    'class="toolhub-key" aria-label="Header name" spellcheck="false"></td>'
                    '<td><input type="password" name="{}-value" autocomplete="new-password" '
                    'class="toolhub-value toolhub-secret" placeholder="value (write-only)" aria-label="Header value">'
                    '</td><td></td>',
                    prefix, row["name"], prefix)
            body.append(format_html('<tr class="toolhub-header-row{}">{}</tr>', " stored" if row["stored"] else "",
                                    cells))
        return format_html(
            '<div class="toolhub-rows" id="id_{}"><table><thead><tr><th>Header</th><th>Value</th><th></th></tr></thead>'
            '<tbody>{}</tbody></table></div><input type="hidden" name="{}-TOTAL" value="{}">',
            name, format_html_join("", "{}", ((b,) for b in body)), name, len(rows))


class HeaderRowsField(forms.Field):
    """The rows as the service's `auth_headers`: KEEP when nothing was touched, None when every header is removed,
    else the headers with "********" for each stored one kept."""

    widget = HeaderRowsWidget

    def clean(self, value: Any) -> Any:
        rows = value if isinstance(value, list) else []
        touched = any(r["remove"] or r["value"] or (r["name"] and not r["stored"]) for r in rows)
        if not touched:
            return KEEP
        headers: dict[str, str] = {}
        for row in rows:
            name = row["name"]
            if not name or row["remove"]:
                if row["value"] and not name:
                    raise forms.ValidationError("a header value needs a header name")
                continue
            if name.lower() in {k.lower() for k in headers}:
                raise forms.ValidationError(f"header {name} is listed twice")
            if row["value"]:
                headers[name] = row["value"]
            elif row["stored"]:
                headers[name] = MASK  # keeps the stored value
            else:
                raise forms.ValidationError(f"header {name} needs a value")
        return headers or None


class SourceAdminForm(_SourceForm):
    """`auth_headers` is write-only: stored headers are listed by name only; blank keeps each stored value."""

    auth_headers_rows = HeaderRowsField(
        label="Auth headers", required=False,
        help_text="Sent with every catalog request (e.g. Authorization: Bearer ...). Values are write-only and "
                  "stored encrypted: leave a stored one blank to keep it, type a new value to replace it, tick "
                  "remove to drop it; add a header in an empty row.",
    )

    class Meta:
        model = MarketSource
        fields = ["tenant", "name", "url", "format", "enabled", "refresh_interval_min"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["auth_headers_rows"].widget = HeaderRowsWidget(stored=list(self.instance.auth_headers or {}))


@admin.register(MarketSource)
class MarketSourceAdmin(ServiceAdminMixin, _MarketSourceAdmin):
    form = SourceAdminForm
    service_error_fields = {"auth_headers": "auth_headers_rows"}
    change_form_template = "admin/market_app/marketsource/change_form.html"
    list_display = ["name", "scope", "url", "format", "enabled", "last_refresh_at", "last_status", "last_result"]
    list_filter = ["enabled", "format", "last_status"]
    search_fields = ["name", "url"]
    readonly_fields = ["cursor", "last_refresh_at", "last_status", "last_result",
                       "last_error", "refreshing_until"]
    actions = ["refresh_sources"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[MarketSource]:
        return super().get_queryset(request).filter(_visible(request)).select_related("tenant")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            kwargs["queryset"] = tenants_for_admin(user=request.user)
            kwargs["required"] = not request.user.is_superuser
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*self.readonly_fields, *(["tenant"] if obj is not None else [])]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.tenant_id is None and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.tenant_id is None and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="Scope")
    def scope(self, obj: MarketSource) -> str:
        return "global" if obj.tenant_id is None else str(obj.tenant)

    @admin.display(description="Last result")
    def last_result(self, obj: MarketSource) -> str:
        if obj.last_status == "error":
            return f"error: {obj.last_error}"
        return counts_line(obj.last_counts) if obj.last_counts else "-"

    def save_model(self, request: HttpRequest, obj: MarketSource, form: Any, change: bool) -> None:
        data = services.SourceInput(
            name=form.cleaned_data["name"], url=form.cleaned_data["url"], format=form.cleaned_data["format"],
            enabled=form.cleaned_data["enabled"], refresh_interval_min=form.cleaned_data["refresh_interval_min"],
            auth_headers=form.cleaned_data["auth_headers_rows"],
        )
        if change:
            saved = self.call_service(request, services.source_update, tenant=obj.tenant, source_id=obj.pk,
                                      changes=data)
        else:
            tenant: Tenant | None = form.cleaned_data.get("tenant")
            data.is_global = tenant is None
            saved = self.call_service(request, services.source_create, tenant=tenant, data=data)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: MarketSource) -> None:
        services.source_delete(tenant=obj.tenant, actor=request.user, source_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MarketSource]) -> None:
        for source in queryset:
            self.delete_model(request, source)

    def get_urls(self) -> list[Any]:
        return [path("<path:object_id>/refresh/", self.admin_site.admin_view(self.refresh_view),
                     name="market_app_marketsource_refresh"), *super().get_urls()]

    def refresh_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The Refresh button of a source's page: the same service as the API, counts in a message."""
        source = self.get_object(request, object_id)
        if request.method != "POST" or source is None:
            raise Http404("no such source")
        try:
            counts = services.source_refresh(source_id=source.pk, tenant=source.tenant, actor=request.user)
        except DomainError as exc:
            self.message_user(request, f"Refresh: {exc.message}", messages.ERROR)
        else:
            level = messages.WARNING if counts["errors_total"] else messages.SUCCESS
            self.message_user(request, f"Refreshed {source.name}: {counts_line(counts)}", level)
        return HttpResponseRedirect(reverse("admin:market_app_marketsource_change", args=[source.pk]))

    @admin.action(description="Refresh selected sources now")
    def refresh_sources(self, request: HttpRequest, queryset: QuerySet[MarketSource]) -> None:
        for source in queryset:
            try:
                counts = services.source_refresh(source_id=source.pk, tenant=source.tenant, actor=request.user)
            except DomainError as exc:
                self.message_user(request, f"{source.name}: {exc.message}", messages.ERROR)
                continue
            level = messages.WARNING if counts["errors_total"] else messages.SUCCESS
            self.message_user(request, f"{source.name}: {counts_line(counts)}", level)


class LoadForm(forms.Form):
    """Load an entry: the tool's name, the tenant, and a value per declared variable (secret ones write-only)."""

    # The tenant the admin works in, named in the header beside its switcher: carried, not chosen a second time.
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), empty_label=None, widget=forms.HiddenInput)
    name = forms.CharField(max_length=64, help_text="The tool's name in the tenant (lowercase, digits, - and _).")

    def __init__(self, *args: Any, entry: MarketEntry, tenants: QuerySet[Tenant], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants  # type: ignore[attr-defined]
        self.fields["tenant"].initial = tenants.first()
        self.target = self.fields["tenant"].initial
        self.fields["name"].initial = suggest_tool_name(entry.name)
        self.variables: list[tuple[str, str, dict[str, Any]]] = []
        for what, declared in (("env", entry.required_env), ("headers", entry.required_headers)):
            for var in declared:
                field_name = f"{what}__{var['name']}"
                secret = bool(var.get("is_secret"))
                self.fields[field_name] = forms.CharField(
                    label=f"{var['name']} ({'header' if what == 'headers' else 'env'})",
                    required=bool(var.get("is_required")) and var.get("default") is None,
                    initial=None if secret else var.get("default"),
                    help_text=" · ".join(x for x in (str(var.get("description") or ""),
                                                      "secret: stored encrypted, never shown again" if secret else
                                                      "shown on the tool's page") if x),
                    widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}) if secret else forms.TextInput(),
                )
                self.variables.append((what, var["name"], var))

    def values(self, what: str) -> dict[str, str]:
        return {name: self.cleaned_data[f"{what}__{name}"] for w, name, _ in self.variables
                if w == what and self.cleaned_data.get(f"{what}__{name}")}


@admin.register(MarketEntry)
class MarketEntryAdmin(ReadOnlyAdminMixin, _MarketEntryAdmin):
    change_form_template = "admin/market_app/marketentry/change_form.html"
    list_display = ["entry", "summary", "kind", "status", "version", "is_shell_command"]
    list_display_links = ["entry"]
    list_select_related = ["source"]
    # Related-only: the source filter offers the sources of visible entries, never other tenants' names.
    list_filter = [("source", admin.RelatedOnlyFieldListFilter), "kind", "status", "is_shell_command"]
    search_fields = ["name", "title", "description"]
    # The install and the declared variables as rows and plain values, not the catalog's raw JSON.
    fields = readonly_fields = ("source", "name", "title", "description", "version", "kind", "status",
                                "install_summary", "variables", "is_shell_command", "content_hash", "created_at",
                                "updated_at")
    actions = ["load_into_tenant"]

    @admin.display(description="Install")
    def install_summary(self, obj: MarketEntry) -> str:
        kind = services.KINDS.get(obj.kind)  # an entry of no known kind (a catalog row without one) shows none
        rows = kind.summary(obj.install or {}) if kind is not None else [("Kind", "-")]
        return format_html('<dl class="toolhub-install">{}</dl>', format_html_join(
            "", "<dt>{}</dt><dd><code>{}</code></dd>", rows))

    @admin.display(description="Variables")
    def variables(self, obj: MarketEntry) -> str:
        declared = [("env", v) for v in obj.required_env or []] + [("header", v) for v in obj.required_headers or []]
        if not declared:
            return "None: the entry loads without values."
        rows = format_html_join("", '<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
                                    "<td>{}</td></tr>", (
            (v.get("name", ""), what, "required" if v.get("is_required") else "optional",
             "secret" if v.get("is_secret", True) else "shown",
             "-" if v.get("default") is None or v.get("is_secret", True) else v.get("default"),
             v.get("description") or "") for what, v in declared))
        return format_html('<div class="toolhub-rows"><table id="toolhub-entry-variables"><thead><tr><th>Name</th>'
                           "<th>Kind</th><th>Needed</th><th>Value is</th><th>Default</th><th>Description</th></tr>"
                           "</thead><tbody>{}</tbody></table></div>", rows)

    def get_queryset(self, request: HttpRequest) -> QuerySet[MarketEntry]:
        return super().get_queryset(request).filter(_visible(request, "source__")).select_related("source")

    @admin.display(description="Entry", ordering="name")
    def entry(self, obj: MarketEntry) -> str:
        return format_html("{}<br><small>{}</small>", obj.title or obj.name, obj.name if obj.title else obj.source)

    @admin.display(description="Description")
    def summary(self, obj: MarketEntry) -> str:
        text = " ".join((obj.description or "").split())
        return text if len(text) <= 140 else text[:137] + "..."

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [path("<path:object_id>/load/", wrap(self.load_view), name="market_app_marketentry_load"),
                path("<path:object_id>/update/", wrap(self.update_view), name="market_app_marketentry_update"),
                *super().get_urls()]

    def _tenants(self, request: HttpRequest, entry: MarketEntry) -> QuerySet[Tenant]:
        """Where the entry loads: the tenant the admin works in (an entry shown is that tenant's or global)."""
        tenants = current_tenants(request)
        return tenants.filter(pk=entry.source.tenant_id) if entry.source.tenant_id else tenants

    def _loaded_tools(self, request: HttpRequest, entry: MarketEntry) -> list[Tool]:
        return list(Tool.objects.filter(market_entry=entry, tenant__in=current_tenants(request))
                    .select_related("tenant").order_by("name"))

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        entry = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if entry is not None:
            extra["load_form"] = getattr(request, "_load_form", None) or LoadForm(
                entry=entry, tenants=self._tenants(request, entry))
            extra["loaded_tools"] = [{"tool": t, "outdated": t.market_hash != entry.content_hash}
                                     for t in self._loaded_tools(request, entry)]
        return super().change_view(request, object_id, form_url, extra)

    def _entry(self, request: HttpRequest, object_id: str) -> MarketEntry:
        entry = self.get_object(request, object_id)
        if request.method != "POST" or entry is None:
            raise Http404("no such entry")
        return entry

    def load_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        entry = self._entry(request, object_id)
        form = LoadForm(request.POST, entry=entry, tenants=self._tenants(request, entry))
        if form.is_valid():
            tenant = form.cleaned_data["tenant"]
            try:
                loaded = services.entry_load(tenant=tenant, actor=request.user, entry_id=entry.pk,
                                             name=form.cleaned_data["name"], env=form.values("env"),
                                             headers=form.values("headers"))
            except DomainError as exc:
                form.add_error(None, exc.message)
            else:
                note = f" {loaded.message}" if loaded.message else ""
                self.message_user(request, f"Loaded {entry.name} into {tenant.slug} as tool {loaded.tool.name!r}.{note}",
                                  messages.WARNING if loaded.message else messages.SUCCESS)
                return HttpResponseRedirect(reverse("admin:tools_app_tool_change", args=[loaded.tool.pk]))
        # Re-show the entry page with the form's errors and its typed (non-secret) values.
        request._load_form = form  # type: ignore[attr-defined]
        request.method = "GET"
        return self.change_view(request, object_id)

    def update_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """"Update from market" (the entry's page and the tool's): first the diff of what the update changes and
        the values it newly needs, then, confirmed, the update itself."""
        entry = self._entry(request, object_id)
        tool = next((t for t in self._loaded_tools(request, entry) if str(t.pk) == request.POST.get("tool")), None)
        if tool is None:
            raise Http404("no such tool")
        back = request.POST.get("back") == "tool"  # the button on the tool's own page
        done = HttpResponseRedirect(reverse("admin:tools_app_tool_change", args=[tool.pk]) if back
                                    else reverse("admin:market_app_marketentry_change", args=[entry.pk]))
        given: dict[str, dict[str, str]] = {
            what: {k.split("__", 1)[1]: str(v) for k, v in request.POST.items() if k.startswith(f"{what}__") and v}
            for what in ("env", "headers")}
        try:
            plan, missing = self._preview(request, tool, given)
        except DomainError as exc:
            self.message_user(request, f"Update of {tool.name}: {exc.message}", messages.ERROR)
            return done
        if request.POST.get("confirm") == "yes" and not missing:
            self._apply_update(request, entry, tool, given)
            return done
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "title": f"Update {tool.name} "
                   f"from the market", "entry": entry, "tool": tool, "plan": plan,
                   "asked": self._asked(entry, missing), "back": back,
                   # Plain values typed so far ride along to the Apply step; a secret is never written into the page.
                   "typed": {k: v for k, v in request.POST.items()
                             if k.startswith(("env__", "headers__")) and v and not self._secret_field(entry, k)}}
        return TemplateResponse(request, "admin/market_app/marketentry/update_confirm.html", context)

    def _apply_update(self, request: HttpRequest, entry: MarketEntry, tool: Tool,
                      given: dict[str, dict[str, str]]) -> None:
        """The confirmed update, said in a message either way."""
        try:
            updated = services.tool_market_update(tenant=tool.tenant, actor=request.user, tool_id=tool.pk,
                                                  env=given["env"], headers=given["headers"])
        except DomainError as exc:
            self.message_user(request, f"Update of {tool.name}: {exc.message}", messages.ERROR)
            return
        note = f" {updated.message}" if updated.message else ""
        self.message_user(request, f"Updated {tool.name} to the current {entry.name} (config version "
                                   f"{updated.tool.config_version}); your values were kept.{note}")

    @staticmethod
    def _asked(entry: MarketEntry, missing: dict[str, list[str]]) -> list[dict[str, Any]]:
        """The form fields for the values the update still needs, as the entry declares them."""
        declared = {(what, v["name"]): v for what, rows in (("env", entry.required_env),
                                                           ("headers", entry.required_headers)) for v in rows}
        return [{"field": f"{what}__{name}", "label": f"{name} ({'header' if what == 'headers' else 'env'})",
                 "secret": bool(declared.get((what, name), {}).get("is_secret", True)),
                 "description": str(declared.get((what, name), {}).get("description") or "")}
                for what, names in missing.items() for name in names]

    @staticmethod
    def _secret_field(entry: MarketEntry, field: str) -> bool:
        what, _, name = field.partition("__")
        rows = entry.required_env if what == "env" else entry.required_headers
        return any(v.get("name") == name and v.get("is_secret", True) for v in rows)

    def _preview(self, request: HttpRequest, tool: Tool,
                 given: dict[str, dict[str, str]]) -> tuple[services.UpdatePlan, dict[str, list[str]]]:
        """The update's plan, and the values it still needs (shown as "to be entered" in the diff meanwhile)."""
        try:
            plan = services.tool_market_update_preview(tenant=tool.tenant, actor=request.user, tool_id=tool.pk,
                                                       env=given["env"], headers=given["headers"])
            return plan, {}
        except MissingVariables as exc:
            missing = {what: list((exc.details or {}).get(what) or []) for what in ("env", "headers")}
        filled = {what: {**given[what], **dict.fromkeys(missing[what], TO_BE_ENTERED)} for what in given}
        plan = services.tool_market_update_preview(tenant=tool.tenant, actor=request.user, tool_id=tool.pk,
                                                   env=filled["env"], headers=filled["headers"])
        return plan, {what: names for what, names in missing.items() if names}

    @admin.action(description="Load into my tenant")
    def load_into_tenant(self, request: HttpRequest, queryset: QuerySet[MarketEntry]) -> None:
        for entry in queryset:
            tenant = current_tenant(request)  # the tenant the admin works in (entries shown are its or global)
            if tenant is None:
                self.message_user(request, f"{entry.name}: you are owner or admin of no tenant", messages.ERROR)
                continue
            try:
                loaded = services.entry_load(tenant=tenant, actor=request.user, entry_id=entry.pk)
            except DomainError as exc:
                self.message_user(request, f"{entry.name}: {exc.message}", messages.ERROR)
                continue
            note = f" {loaded.message}" if loaded.message else ""
            self.message_user(
                request, f"{entry.name}: loaded into {tenant.slug} as tool {loaded.tool.name!r}.{note}",
                messages.WARNING if loaded.message else messages.SUCCESS,
            )
