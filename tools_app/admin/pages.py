"""Actions on the tool's own page: Test, Refresh, Enable/Disable, Try a function, Review and approve changes.

Each is a POST that calls the same service the API calls and redirects back with a message (POST-redirect-GET);
Try renders its result on its own page. The tool is looked up through the admin's tenant-scoped queryset, so
another tenant's tool is a 404 like a missing one.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.templatetags.static import static
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.errors import DomainError
from core.links import public_base
from tools_app.admin import screen as screen_admin
from tools_app.connections import grants, oauth_flow
from tools_app.models import ApprovalVia, FunctionState, ScreenStatus, Tool, ToolFunction, ToolStatus
from tools_app.runtime.errors import RuntimeToolError
from tools_app.runtime.screen import reveal
from tools_app.services import discovery, screening, tool_set_status
from tools_app.services.invoke import tool_invoke

MAX_RESULT_CHARS = 20_000


def changes_line(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k} {changes.get(k, 0)}" for k in ("added", "changed", "removed"))


def history_of_test(body: dict[str, Any]) -> str:
    """A Test as the tool's HISTORY says it (the page's button and the list action alike)."""
    return f"Test: {'OK' if body['ok'] else 'failed'} in {body['latency_ms']} ms" + (
        f", {body['tool_count']} function(s)." if body["ok"] else f" ({body['error']['code']}).")


def history_of_refresh(body: dict[str, Any]) -> str:
    return (f"Refresh: {changes_line(body['changes'])}." if body["ok"]
            else f"Refresh: failed ({body['error']['code']}).")


# --- Try a function: a form generated from the function's JSON Schema -------------------------------------

def schema_inputs(schema: Any, values: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One input per top-level property: text, number, yes/no, a choice, or JSON for anything else."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = set(schema.get("required") or [])
    inputs = []
    for name, prop in schema["properties"].items():
        prop = prop if isinstance(prop, dict) else {}
        kind = prop.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            kind = kinds[0] if len(kinds) == 1 else None
        if "enum" in prop and isinstance(prop["enum"], list) and all(isinstance(v, str) for v in prop["enum"]):
            widget = "choice"
        elif kind in ("string", "integer", "number", "boolean"):
            widget = kind
        else:
            widget = "json"
        inputs.append({"name": name, "widget": widget, "required": name in required,
                       "description": str(prop.get("description") or prop.get("title") or ""),
                       "choices": prop.get("enum") or [], "value": (values or {}).get(name, ""),
                       "default": prop.get("default")})
    return inputs


def arguments_from(inputs: list[dict[str, Any]], data: Any) -> tuple[dict[str, Any], list[str]]:
    """The arguments typed into the generated inputs (blank optional ones left out), and what failed to parse."""
    args: dict[str, Any] = {}
    problems: list[str] = []
    for item in inputs:
        raw = data.get(f"arg:{item['name']}", "")
        item["value"] = raw
        if raw == "":
            continue  # left out: the function's own validation names a missing required argument
        try:
            if item["widget"] == "integer":
                args[item["name"]] = int(raw)
            elif item["widget"] == "number":
                args[item["name"]] = float(raw)
            elif item["widget"] == "boolean":
                args[item["name"]] = raw == "true"
            elif item["widget"] == "json":
                args[item["name"]] = json.loads(raw)
            else:
                args[item["name"]] = raw
        except ValueError:
            problems.append(f"{item['name']}: not a valid {item['widget']}")
    return args, problems


# --- the diff of a changed function --------------------------------------------------------------------------

def definition_text(definition: dict[str, Any] | None) -> list[str]:
    if definition is None:
        return []
    # As the model reads it: invisible characters made visible (⟨U+E0041⟩), never silently in the diff.
    return reveal(json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False)).splitlines()


def diff_html(old: dict[str, Any] | None, new: dict[str, Any]) -> SafeString:
    """A unified diff (old approved definition → what the server offers now), lines marked added/removed."""
    lines = list(difflib.unified_diff(definition_text(old), definition_text(new), "approved", "offered now",
                                      lineterm="", n=3))
    def css(line: str) -> str:
        if line.startswith(("+++", "---", "@@")):
            return "diff-meta"
        return {"+": "diff-add", "-": "diff-del"}.get(line[:1], "diff-ctx")
    # Each line is a block of its own: no newline between them (a <pre> would show it as an empty line).
    body = format_html_join("", '<span class="{}">{}</span>', ((css(line), line or " ") for line in lines))
    return format_html('<pre class="toolhub-diff">{}</pre>', body or "(no difference in the stored definition)")


# Functions waiting for an admin: drifted (CHANGED) or held by the screen (HELD).
AWAITING = (FunctionState.CHANGED, FunctionState.HELD)


def new_findings(fn: ToolFunction) -> set[tuple[str, str, str]]:
    """The findings of the current definition that the approved one did not have (what the drift brought)."""
    now = {(f.get("rule"), f.get("field"), f.get("excerpt")) for f in fn.screen_findings or []}
    old_def = fn.approved_definition
    if old_def is None:
        return now
    before = screening.findings_for(name=fn.name, title=fn.title, description=old_def.get("description") or "",
                                    input_schema=old_def.get("input_schema"), output_schema=old_def.get("output_schema"),
                                    annotations=old_def.get("annotations"))
    return now - {(f["rule"], f["field"], f["excerpt"]) for f in before}


def function_badge(fn: ToolFunction) -> SafeString:
    """Never a green tick for a function awaiting approval: it is left out of every toolset until approved."""
    if fn.state == FunctionState.CHANGED:
        return format_html('<span class="toolhub-badge toolhub-badge-wait" title="{}">awaiting approval</span>',
                           "new or changed since it was approved; left out of toolsets until approved")
    if fn.state == FunctionState.HELD:
        return format_html('<span class="toolhub-badge toolhub-badge-wait" title="{}">held by the screen</span>',
                           "the screen found instructions aimed at the model; left out of toolsets until approved")
    if fn.state == FunctionState.REMOVED:
        return format_html('<span class="toolhub-badge toolhub-badge-off">{}</span>', "removed")
    if fn.unsupported_reason:
        return format_html('<span class="toolhub-badge toolhub-badge-off" title="{}">unsupported</span>',
                           fn.unsupported_reason)
    if not fn.enabled:
        return format_html('<span class="toolhub-badge toolhub-badge-off">{}</span>', "disabled")
    if fn.tool.status != ToolStatus.ENABLED:
        return format_html('<span class="toolhub-badge toolhub-badge-off" title="{}">{}</span>',
                           "the function is on, but its tool is disabled: nothing calls it", "tool disabled")
    return format_html('<span class="toolhub-badge toolhub-badge-ok"><img src="{}" alt="True"> enabled</span>',
                       static("admin/img/icon-yes.svg"))


class ToolPagesMixin:
    """URLs and views of the actions on a tool's page (mixed into ToolAdmin)."""

    admin_site: Any
    model: type[Tool]

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        own = [
            path("<path:object_id>/test/", wrap(self.test_view), name="tools_app_tool_test"),
            path("<path:object_id>/refresh/", wrap(self.refresh_view), name="tools_app_tool_refresh"),
            path("<path:object_id>/status/", wrap(self.status_view), name="tools_app_tool_status"),
            path("<path:object_id>/try/", wrap(self.try_view), name="tools_app_tool_try"),
            path("<path:object_id>/changes/", wrap(self.changes_view), name="tools_app_tool_changes"),
            path("<path:object_id>/function/", wrap(self.function_view), name="tools_app_tool_function"),
            path("<path:object_id>/oauth/connect/", wrap(self.oauth_connect_view), name="tools_app_tool_oauth_connect"),
            path("<path:object_id>/oauth/disconnect/", wrap(self.oauth_disconnect_view),
                 name="tools_app_tool_oauth_disconnect"),
        ]
        urls: list[Any] = own + super().get_urls()  # type: ignore[misc]
        return urls

    def _tool(self, request: HttpRequest, object_id: str) -> Tool:
        tool: Tool | None = self.get_object(request, object_id)  # type: ignore[attr-defined]
        if tool is None or not self.has_view_permission(request, tool):  # type: ignore[attr-defined]
            raise Http404("no such tool")
        return tool

    def _history(self, request: HttpRequest, tool: Tool, message: str) -> None:
        """The tool's HISTORY records what was done from its page, not only saves."""
        self.log_change(request, tool, message)  # type: ignore[attr-defined]

    def _back(self, tool: Tool) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:tools_app_tool_change", args=[tool.pk]))

    def _post_only(self, request: HttpRequest) -> None:
        if request.method != "POST":
            raise Http404("POST only")

    def test_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self._post_only(request)
        tool = self._tool(request, object_id)
        try:
            body = discovery.tool_test(tenant=tool.tenant, actor=request.user, tool_id=tool.pk)
        except DomainError as exc:
            messages.error(request, f"Test: {exc.message}")
            return self._back(tool)
        if body["ok"]:
            names = ", ".join(f["name"] for f in body["functions"][:10])
            more = f" and {body['tool_count'] - 10} more" if body["tool_count"] > 10 else ""
            server = body.get("server") or {}
            spoke = f" over MCP {body['protocol_version']}" if body.get("protocol_version") else ""
            messages.success(request, f"Test OK in {body['latency_ms']} ms: {server.get('name', '?')} "
                                      f"{server.get('version', '')}{spoke}, {body['tool_count']} function(s): "
                                      f"{names}{more}. "
                                      f"Compared with the stored functions: {changes_line(body['changes'])}.")
        else:
            messages.error(request, f"Test failed after {body['latency_ms']} ms: {body['error']['code']}: "
                                    f"{body['error']['message']}")
        self._history(request, tool, history_of_test(body))
        return self._back(tool)

    def refresh_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self._post_only(request)
        tool = self._tool(request, object_id)
        try:
            body = discovery.tool_refresh(tenant=tool.tenant, actor=request.user, tool_id=tool.pk)
        except DomainError as exc:
            messages.error(request, f"Refresh: {exc.message}")
            return self._back(tool)
        if body["ok"]:
            held = tool.functions.filter(state__in=AWAITING).count()
            note = f" {held} new or changed function(s) wait for approval: review them." if held else ""
            level = messages.WARNING if held else messages.SUCCESS
            messages.add_message(request, level, f"Refreshed: {body['tool_count']} function(s); "
                                                 f"{changes_line(body['changes'])}.{note}")
        else:
            messages.error(request, f"Refresh failed: {body['error']['code']}: {body['error']['message']}")
        self._history(request, tool, history_of_refresh(body))
        return self._back(tool)

    def status_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self._post_only(request)
        tool = self._tool(request, object_id)
        status = request.POST.get("status", "")
        try:
            tool = tool_set_status(tenant=tool.tenant, actor=request.user, tool_id=tool.pk, status=status)
        except DomainError as exc:
            messages.error(request, f"Not changed: {exc.message}")
            return self._back(tool)
        messages.success(request, f"Tool {tool.name} is now {'enabled' if tool.status == ToolStatus.ENABLED else 'disabled'}.")
        self._history(request, tool, f"{'Enabled' if tool.status == ToolStatus.ENABLED else 'Disabled'} the tool.")
        return self._back(tool)

    def oauth_connect_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Connect (or reconnect) the tool's OAuth account: on to Toolhub's start page, then the provider's sign-in;
        the callback lands back on this page."""
        self._post_only(request)
        tool = self._tool(request, object_id)
        try:
            link = oauth_flow.oauth_connect(tenant=tool.tenant, actor=request.user, tool_id=tool.pk,
                                            base_url=public_base(request))["authorize_url"]
        except (DomainError, RuntimeToolError) as exc:
            messages.error(request, f"Connect: {exc.message}")
            return self._back(tool)
        self._history(request, tool, "Started an OAuth connection.")
        return HttpResponseRedirect(link)

    def oauth_disconnect_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        self._post_only(request)
        tool = self._tool(request, object_id)
        try:
            grants.oauth_disconnect(tenant=tool.tenant, actor=request.user, tool_id=tool.pk)
        except DomainError as exc:
            messages.error(request, f"Disconnect: {exc.message}")
            return self._back(tool)
        messages.success(request, f"Disconnected {tool.name}: its calls ask for authorization until it is connected "
                                  "again.")
        self._history(request, tool, "Disconnected the OAuth account.")
        return self._back(tool)

    def function_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A function's own switch (the buttons in the functions table): `toggle` is "<name>:1" or "<name>:0"."""
        self._post_only(request)
        tool = self._tool(request, object_id)
        name, _, flag = request.POST.get("toggle", "").rpartition(":")
        if flag not in ("0", "1") or not name:
            messages.error(request, 'Not changed: send toggle="<function>:1" or "<function>:0"')
            return self._back(tool)
        try:
            discovery.function_update(tenant=tool.tenant, actor=request.user, tool_id=tool.pk, name=name,
                                      enabled=flag == "1", requires_approval=...)
        except DomainError as exc:
            messages.error(request, f"Not changed: {exc.message}")
        else:
            messages.success(request, f"Function {tool.name}.{name} is now {'enabled' if flag == '1' else 'disabled'}.")
            self._history(request, tool, f"{'Enabled' if flag == '1' else 'Disabled'} function {name}.")
        return self._back(tool)

    def try_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        tool = self._tool(request, object_id)
        functions = list(tool.functions.exclude(state=FunctionState.REMOVED).order_by("name"))
        chosen_name = request.POST.get("function") or request.GET.get("function") or ""
        chosen = next((f for f in functions if f.name == chosen_name), functions[0] if functions else None)
        inputs = schema_inputs(chosen.input_schema if chosen else None)
        raw_args = request.POST.get("arguments_json", "") if request.method == "POST" else ""
        result: dict[str, Any] | None = None
        problems: list[str] = []
        if request.method == "POST" and chosen is not None:
            if raw_args.strip():
                try:
                    arguments: Any = json.loads(raw_args)
                except json.JSONDecodeError as exc:
                    problems.append(f"arguments are not valid JSON: {exc.msg} at line {exc.lineno}")
                    arguments = None
            else:
                arguments, problems = arguments_from(inputs, request.POST)
            if not problems:
                try:
                    invocation = tool_invoke(tenant=tool.tenant, actor=request.user, tool_id=tool.pk,
                                             function=chosen.name, arguments=arguments, via=ApprovalVia.ADMIN)
                except DomainError as exc:
                    problems.append(exc.message)
                else:
                    result = invocation.body()
                    self._history(request, tool, f"Tried {chosen.name}: {'OK' if result.get('success') else 'failed'}"
                                                 f" (call #{result.get('call_id')}).")
                    result["data_json"] = json.dumps(result.get("data"), indent=2, ensure_ascii=False)[
                        :MAX_RESULT_CHARS] if result.get("data") is not None else ""
                    result["text"] = (result.get("text") or "")[:MAX_RESULT_CHARS]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta, "original": tool, "title": f"Try a function of {tool.name}",
            "tool": tool, "functions": functions, "chosen": chosen, "inputs": inputs, "raw_args": raw_args,
            "result": result, "problems": problems,
            "schema_json": json.dumps(chosen.input_schema, indent=2) if chosen else "",
        }
        return TemplateResponse(request, "admin/tools_app/tool/try.html", context)

    def changes_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        tool = self._tool(request, object_id)
        if request.method == "POST":
            name = request.POST.get("function", "")
            try:
                held = tool.functions.filter(name=name, screen_status=ScreenStatus.HELD).exists()
                fn = discovery.function_approve(tenant=tool.tenant, actor=request.user, tool_id=tool.pk, name=name)
            except DomainError as exc:
                messages.error(request, f"Not approved: {exc.message}")
            else:
                messages.success(request, f"Approved {tool.name}.{name}: its current definition is trusted and it "
                                          "is offered to agents again.")
                # Who approved which definition (the row keeps screen_approved_by/at/hash too).
                self._history(request, tool, f"Approved function {name} held by the screen (definition "
                                             f"{fn.schema_hash[:12]})." if held else f"Approved function {name}.")
            remaining = tool.functions.filter(state__in=AWAITING).exists()
            if remaining:
                return HttpResponseRedirect(reverse("admin:tools_app_tool_changes", args=[tool.pk]))
            return self._back(tool)
        changed = [
            {"fn": fn, "new": fn.approved_definition is None and not fn.approved_hash,
             "unknown_old": fn.approved_definition is None and bool(fn.approved_hash),
             "diff": diff_html(fn.approved_definition, fn.definition()),
             "old_description": reveal((fn.approved_definition or {}).get("description") or ""),
             "description": screen_admin.highlighted(fn.description, fn.screen_findings or []),
             "findings": screen_admin.findings_html(fn.screen_findings or [], new_findings(fn)), "held": fn.state == FunctionState.HELD}
            for fn in tool.functions.filter(state__in=AWAITING).order_by("name")
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta, "original": tool, "title": f"Review changed functions of {tool.name}",
            "tool": tool, "changed": changed,
        }
        return TemplateResponse(request, "admin/tools_app/tool/changes.html", context)
