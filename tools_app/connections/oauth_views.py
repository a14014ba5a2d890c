"""The browser half of connecting an OAuth tool: the connect link (`paths.START_PATH`), the provider's callback
(`paths.CALLBACK_PATH`, reached through the registered redirect URI) and Toolhub's client metadata document."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from core.errors import DomainError, PermissionDenied
from core.links import public_base
from tenants_app.models import Role
from tenants_app.permissions import ensure_role
from tools_app.connections import client, oauth_flow
from tools_app.errors import OAuthFlowRefused
from tools_app.runtime.errors import RuntimeToolError

RESULT_TEMPLATE = "connections/result.html"


def _refused(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, RESULT_TEMPLATE, {"ok": False, "message": message, "title": "Not connected"}, status=400)


@never_cache
@login_required  # a signed-out visitor signs in first (settings.LOGIN_URL), then comes back here
def start(request: HttpRequest, flow: str) -> HttpResponse:
    try:
        target = oauth_flow.oauth_flow_start(user=request.user, flow_id=flow, session_key=_session(request))
    except OAuthFlowRefused as exc:
        return _refused(request, exc.message)
    return HttpResponseRedirect(target)


@never_cache
@login_required
def callback(request: HttpRequest) -> HttpResponse:
    try:
        connection = oauth_flow.oauth_flow_complete(
            user=request.user, session_key=_session(request), state=request.GET.get("state", ""),
            code=request.GET.get("code", ""), error=request.GET.get("error", ""),
        )
    except (DomainError, RuntimeToolError) as exc:  # a refused flow, or the provider's failure: typed, never a 500
        return _refused(request, exc.message)
    tool = connection.tool
    try:
        admin = bool(ensure_role(tenant=tool.tenant, user=request.user, at_least=Role.ADMIN))
    except PermissionDenied:
        admin = False
    if connection.user_id is not None:  # the member's own account: their connections page
        back = reverse("my-connections") + f"?tenant={tool.tenant.slug}"
    elif admin and request.user.is_staff:
        back = reverse("admin:tools_app_tool_change", args=[tool.pk])
    else:
        back = reverse("playground") + f"?tenant={tool.tenant.slug}"
    whose = "your own account" if connection.user_id else "the shared account everyone's calls use"
    return render(request, RESULT_TEMPLATE, {
        "ok": True, "title": "Connected", "tool": tool, "whose": whose, "back": back,
        "message": f"{tool.name} is connected with {whose}.",
    })


def client_metadata(request: HttpRequest) -> HttpResponse:
    """Toolhub's Client ID Metadata Document (its URL is the client id at servers that take one); https only."""
    document = client.client_metadata(public_base(request))
    if document is None:
        raise Http404("a client metadata document needs an https public URL (TOOLHUB_PUBLIC_URL)")
    return JsonResponse(document)


def _session(request: HttpRequest) -> str | None:
    if not request.session.session_key:
        request.session.save()
    return request.session.session_key
