"""The approvals queue in the admin: pending requests of the current tenant, decided one by one or in a batch.

Every decision goes through tools_app.services.approvals.approval_decide (the one rule: who may decide,
expiry, running a held direct call); this page only shows and forwards.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import JSONField, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince, timeuntil

from core.errors import DomainError
from core.secrets import redact
from tenants_app.admin_scoping import TenantRoleAdminMixin, current_tenant, person
from tools_app import policies
from tools_app.configs import secret_values
from tools_app.models import Approval, ApprovalStatus, ApprovalVia, Safety, ToolFunction, function_safety
from tools_app.services.approvals import approval_decide, may_decide

# Generic in their model for the type checker (django_stubs_ext.monkeypatch() in the settings makes Django's
# classes subscriptable at run time too).
_ApprovalAdmin = admin.ModelAdmin[Approval]

ARGUMENTS_SHOWN = 300  # characters of the (redacted) arguments shown in the list


class StatusFilter(admin.SimpleListFilter):
    """Pending (and not yet expired) by default: the queue is what waits for a person."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("pending", "Pending"), ("approved", "Approved"), ("denied", "Denied"), ("expired", "Expired"),
                ("all", "All")]

    def choices(self, changelist: Any) -> Any:
        value = self.value() or "pending"
        for key, label in self.lookup_choices:
            yield {"selected": value == key, "query_string": changelist.get_query_string({self.parameter_name: key}),
                   "display": label}

    def queryset(self, request: HttpRequest, queryset: QuerySet[Approval]) -> QuerySet[Approval]:
        value = self.value() or "pending"
        now = timezone.now()
        if value == "pending":
            return queryset.filter(status=ApprovalStatus.PENDING, expires_at__gt=now)
        if value == "expired":
            return queryset.filter(status=ApprovalStatus.EXPIRED) | queryset.filter(
                status=ApprovalStatus.PENDING, expires_at__lte=now)
        if value in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED):
            return queryset.filter(status=value)
        return queryset


class ApprovalAdmin(TenantRoleAdminMixin, _ApprovalAdmin):
    list_display = ["request", "arguments_shown", "requester", "safety_shown", "waiting", "state", "decide"]
    list_display_links = ["request"]
    change_list_template = "admin/approvals/change_list.html"
    list_filter = [StatusFilter, "via"]
    search_fields = ["tool_call__tool_name", "tool_call__function", "requested_by__username"]
    list_per_page = 50
    actions = ["approve_selected", "deny_selected"]
    fields = readonly_fields = [  # type: ignore[assignment]
        "request", "state", "source", "calls", "requested_by_name", "safety_shown", "count_shown", "warning",
        "arguments_full", "created_at", "expires_at", "decided_by_name", "decided_at", "decide"]
    requested_by_name = person("requested_by", "Requested by")
    decided_by_name = person("decided_by", "Decided by")

    # --- access: view for the tenant's owners/admins, writes only through the decide service ------------

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Approval]:
        tenant = current_tenant(request)
        if tenant is None:
            return Approval.objects.none()
        fn = ToolFunction.objects.filter(tool_id=OuterRef("tool_call__tool_id"), name=OuterRef("tool_call__function"))
        return (
            policies.approvals_visible(tenant=tenant, user=request.user)
            .select_related("tool_call__agent", "tool_call__conversation", "tenant", "result_call")
            .annotate(fn_override=Subquery(fn.values("safety_override")[:1]),
                      fn_annotations=Subquery(fn.values("annotations")[:1], output_field=JSONField()))
            .order_by("expires_at", "id")
        )

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = list(super().get_list_display(request))
        if request.GET.get("status", "pending") == "pending":
            shown.remove("state")  # every row is pending: the column would only repeat the filter
        return shown

    def get_actions(self, request: HttpRequest) -> Any:
        return {k: v for k, v in super().get_actions(request).items() if k in ("approve_selected", "deny_selected")}

    def has_view_or_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    # --- columns --------------------------------------------------------------------------------------

    @admin.display(description="Request", ordering="tool_call__tool_name")
    def request(self, obj: Approval) -> str:
        count = f" ×{obj.count}" if obj.count > 1 else ""
        return f"#{obj.pk} {obj.tool_call.tool_name}.{obj.tool_call.function}{count}"

    @admin.display(description="Requested by", ordering="requested_by__username")
    def requester(self, obj: Approval) -> str:
        return format_html("{}<br><span class='quiet'>{}</span>", obj.requested_by, self.source(obj))

    @admin.display(description="Waiting", ordering="created_at")
    def waiting(self, obj: Approval) -> str:
        expiry = self.expiry(obj)
        left = expiry[3:] + " left" if expiry.startswith("in ") else expiry
        return format_html("{}<br><span class='quiet'>{}</span>", timesince(obj.created_at, depth=1), left)

    def _arguments(self, obj: Approval) -> Any:
        # Audited arguments are redacted on write; scrubbing again with the tool's current secrets also
        # catches a value that became a secret since (one scrubber, core.secrets).
        tool = obj.tool_call.tool
        secrets = secret_values(tool.type, tool.config) if tool is not None else []
        return redact(obj.tool_call.arguments, secrets)

    @admin.display(description="Arguments (secrets redacted)")
    def arguments_shown(self, obj: Approval) -> str:
        import json

        text = json.dumps(self._arguments(obj), ensure_ascii=False, sort_keys=True)
        if len(text) > ARGUMENTS_SHOWN:
            text = text[:ARGUMENTS_SHOWN] + "…"
        return format_html("<code>{}</code>", text)

    @admin.display(description="Arguments (secrets redacted)")
    def arguments_full(self, obj: Approval) -> str:
        import json

        return format_html("<pre>{}</pre>", json.dumps(self._arguments(obj), ensure_ascii=False, indent=2,
                                                        sort_keys=True))

    @admin.display(description="From")
    def source(self, obj: Approval) -> str:
        call = obj.tool_call
        if obj.via == ApprovalVia.CHAT:
            agent = call.agent.name if call.agent is not None else "an agent"
            where = f" (conversation #{call.conversation_id})" if call.conversation_id else ""
            return f"agent {agent}{where}"
        if obj.via == ApprovalVia.GATEWAY:
            return f"MCP gateway, agent {call.agent.name}" if call.agent is not None else "MCP gateway"
        if obj.via == ApprovalVia.ADMIN:
            return "Try on the tool's admin page"
        return "direct call (API)"

    @admin.display(description="Audit")
    def calls(self, obj: Approval) -> str:
        """The audit rows behind the request: the held call, the call its approval ran, the conversation."""
        call = obj.tool_call
        parts = [format_html('held as <a href="{}" id="toolhub-held-call">call #{}</a>',
                             reverse("admin:tools_app_toolcall_change", args=[call.pk]), call.pk)]
        if obj.result_call_id:
            parts.append(format_html('ran as <a href="{}" id="toolhub-result-call">call #{}</a> ({})',
                                     reverse("admin:tools_app_toolcall_change", args=[obj.result_call_id]),
                                     obj.result_call_id, obj.result_call.get_status_display() if obj.result_call
                                     else "?"))
        elif obj.status == ApprovalStatus.APPROVED and obj.via != ApprovalVia.CHAT:
            parts.append(format_html("{}", "the approved run left no audit row"))
        if call.conversation_id:
            parts.append(format_html('in <a href="{}">conversation #{}</a>',
                                     reverse("admin:agents_app_conversation_change", args=[call.conversation_id]),
                                     call.conversation_id))
        if call.agent_id:
            parts.append(format_html('agent <a href="{}">{}</a>', reverse("admin:agents_app_agent_change",
                                                                          args=[call.agent_id]), call.agent))
        return format_html_join(" · ", "{}", ((p,) for p in parts))

    def _safety(self, obj: Approval) -> str:
        tool = obj.tool_call.tool
        if tool is None:
            return "?"
        return str(function_safety(tool_safety=tool.safety, override=getattr(obj, "fn_override", "") or "",
                                   annotations=getattr(obj, "fn_annotations", None)))

    def _destructive(self, obj: Approval) -> bool:
        """A DESTRUCTIVE call (the warning it was requested with, or the function's safety now): confirm first."""
        return bool(obj.warning) or self._safety(obj) == Safety.DESTRUCTIVE

    @admin.display(description="Safety")
    def safety_shown(self, obj: Approval) -> str:
        safety = self._safety(obj)
        css = {"DESTRUCTIVE": "bad", "WRITE": "warn", "READ_ONLY": "ok"}.get(str(safety), "muted")
        return format_html('<span class="toolhub-badge {}" title="{}">{}</span>', css, obj.warning or "", safety)

    @admin.display(description="Calls")
    def count_shown(self, obj: Approval) -> str:
        return f"×{obj.count}" if obj.count > 1 else "1"

    @admin.display(description="Age", ordering="created_at")
    def age(self, obj: Approval) -> str:
        return timesince(obj.created_at) + " ago"

    @admin.display(description="Expiry", ordering="expires_at")
    def expiry(self, obj: Approval) -> str:
        if obj.status != ApprovalStatus.PENDING:
            return "-"
        if obj.expires_at <= timezone.now():
            return "expired"
        return "in " + timeuntil(obj.expires_at, depth=1)

    @admin.display(description="Status", ordering="status")
    def state(self, obj: Approval) -> str:
        if obj.status == ApprovalStatus.PENDING and obj.expires_at <= timezone.now():
            return format_html('<span class="toolhub-badge muted">{}</span>', "expired")
        if obj.status == ApprovalStatus.EXPIRED and obj.expired_reason:
            # Why it ran nothing: the typed reason (as the API's expired_reason) and its words.
            return format_html('<span class="toolhub-badge muted" title="{}">{}</span> {}<br><span class="quiet">{}</span>',
                               obj.expired_reason, "expired", obj.get_expired_reason_display(), obj.expired_message)
        css = {"pending": "warn", "approved": "ok", "denied": "bad"}.get(obj.status, "muted")
        label = obj.get_status_display()
        if obj.decided_by_id and obj.status in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED):
            return format_html('<span class="toolhub-badge {}">{}</span> by {}', css, label, obj.decided_by)
        return format_html('<span class="toolhub-badge {}">{}</span>', css, label)

    @admin.display(description="Decide")
    def decide(self, obj: Approval) -> str:
        if obj.status != ApprovalStatus.PENDING or obj.expires_at <= timezone.now():
            return "-"
        url = reverse("admin:tools_app_approval_decide", args=[obj.pk])
        count = f" ×{obj.count}" if obj.count > 1 else ""
        # The row sits inside the changelist's form (which carries the CSRF token): `formaction` sends
        # that form to this approval's decide URL instead of the bulk-action handler.
        # A DESTRUCTIVE call's Approve leads to a confirmation (decide_view), and says so.
        approve = ("Approve…", "Shows the call and its warning before it runs") if self._destructive(obj) \
            else ("Approve", "Runs a held direct call now")
        return format_html_join(
            " ", '<button type="submit" formaction="{}" name="decision" value="{}" class="{}" title="{}">{}{}</button>',
            [(url, "approve", "toolhub-approve", approve[1], approve[0], count),
             (url, "deny", "toolhub-deny", "Nothing runs", "Deny", count)],
        )

    # --- deciding -------------------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        return [path("<int:approval_id>/decide/", self.admin_site.admin_view(self.decide_view),
                     name="tools_app_approval_decide"), *super().get_urls()]

    def _decide(self, request: HttpRequest, approval: Approval, approve: bool) -> bool:
        tenant = approval.tenant  # the queue lists only the current tenant's approvals
        what = f"#{approval.pk} {approval.tool_call.tool_name}.{approval.tool_call.function}"
        try:
            decision = approval_decide(tenant=tenant, actor=request.user, approval_id=approval.pk, approve=approve)
        except DomainError as exc:
            self.message_user(request, f"{what}: not decided: {exc.message}", messages.ERROR)
            return False
        verb = "approved" if approve else "denied"
        calls = f" ({approval.count} calls)" if approval.count > 1 else ""
        shown = format_html('<a href="{}">{}</a>', reverse("admin:tools_app_approval_change", args=[approval.pk]), what)
        if decision.invocation is not None:
            body = decision.invocation.body()
            outcome = "it ran: OK" if body.get("success") else f"it ran and failed: {body.get('error_code')}"
            ran = format_html('<a href="{}" class="toolhub-result-call">call #{}</a>',
                              reverse("admin:tools_app_toolcall_change", args=[body["call_id"]]), body["call_id"]) \
                if body.get("call_id") else "no audit row"
            self.message_user(request, format_html("{}{} {}; {} ({}).", shown, calls, verb, outcome, ran),
                              messages.SUCCESS if body.get("success") else messages.WARNING)
        elif approval.via == ApprovalVia.CHAT and approve:
            conversation = approval.tool_call.conversation_id
            where = format_html('<a href="{}">the conversation</a>', reverse(
                "admin:agents_app_conversation_change", args=[conversation])) if conversation else "the conversation"
            self.message_user(request, format_html("{}{} approved; {} continues when it is resumed (the playground "
                                                   "does so when reopened).", shown, calls, where), messages.SUCCESS)
        else:
            self.message_user(request, format_html("{}{} {}.", shown, calls, verb), messages.SUCCESS)
        return True

    def decide_view(self, request: HttpRequest, approval_id: int) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        approval = self.get_queryset(request).filter(pk=approval_id).first()
        changelist = reverse("admin:tools_app_approval_changelist")
        if approval is None:
            self.message_user(request, "That approval does not exist (or is not yours to see).", messages.ERROR)
            return HttpResponseRedirect(changelist)
        decision = request.POST.get("decision")
        if decision not in ("approve", "deny"):
            self.message_user(request, "Choose approve or deny.", messages.ERROR)
        elif (decision == "approve" and request.POST.get("confirmed") != "yes" and self._destructive(approval)
              and may_decide(tenant=approval.tenant, actor=request.user, approval=approval)[0]):
            # One click must not run a DESTRUCTIVE call: the call, its arguments and warning first, then a yes.
            return self._confirm(request, [approval], "approve", form_action=reverse(
                "admin:tools_app_approval_decide", args=[approval.pk]), hidden=[("decision", "approve")])
        else:
            self._decide(request, approval, decision == "approve")
        return HttpResponseRedirect(changelist)

    def _confirm(self, request: HttpRequest, rows: list[Approval], verb: str, *, form_action: str = "",
                 hidden: list[tuple[str, Any]]) -> TemplateResponse:
        """The page that shows a decision before it is made (a batch, or one DESTRUCTIVE approval)."""
        destructive = [a for a in rows if self._destructive(a)] if verb == "approve" else []
        warning = ""
        if destructive:
            warning = (f"{'This call is' if len(rows) == 1 else f'{len(destructive)} of these calls are'} "
                       "DESTRUCTIVE: approving runs it now, and it may delete or irreversibly change data.")
        one = rows[0] if form_action and len(rows) == 1 else None
        context = {
            **self.admin_site.each_context(request),
            "title": (f"{verb.capitalize()} #{one.pk} {one.tool_call.tool_name}.{one.tool_call.function}?" if one
                      else f"{verb.capitalize()} {len(rows)} request(s)?"),
            "confirm_label": (f"Yes, {verb} it{' and run it now' if verb == 'approve' else ''}" if one else
                              f"Yes, {verb} {len(rows)} request{'s' if len(rows) != 1 else ''} "
                              f"({sum(a.count for a in rows)} call{'s' if sum(a.count for a in rows) != 1 else ''})"),
            "opts": self.model._meta,
            "rows": [(a, self.source(a), self.count_shown(a), self.arguments_shown(a)) for a in rows],
            "calls": sum(a.count for a in rows),
            "verb": verb,
            "destructive": warning,
            "form_action": form_action,
            "hidden": hidden,
        }
        return TemplateResponse(request, "admin/approvals/confirm_decision.html", context)

    def _batch(self, request: HttpRequest, queryset: QuerySet[Approval], approve: bool) -> HttpResponse | None:
        verb = "approve" if approve else "deny"
        rows = list(queryset)
        if request.POST.get("confirmed") != "yes":
            # The batch is shown, with how many calls it covers, before anything is decided.
            return self._confirm(request, rows, verb, hidden=[
                *((helpers.ACTION_CHECKBOX_NAME, a.pk) for a in rows), ("action", f"{verb}_selected")])
        done = sum(self._decide(request, a, approve) for a in rows)
        self.message_user(request, f"{done} of {len(rows)} request(s) {'approved' if approve else 'denied'}.")
        return None

    @admin.action(description="Approve selected requests…")
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[Approval]) -> HttpResponse | None:
        return self._batch(request, queryset, True)

    @admin.action(description="Deny selected requests…")
    def deny_selected(self, request: HttpRequest, queryset: QuerySet[Approval]) -> HttpResponse | None:
        return self._batch(request, queryset, False)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        # The queue needs its width more than the section menu.
        context = {**(extra_context or {}), "title": "Approvals queue", "is_nav_sidebar_enabled": False}
        return super().changelist_view(request, context)
