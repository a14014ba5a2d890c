"""A member's own connections page (`paths.HOME_PATH`): their OAuth accounts and per-user keys, per tenant.

Thin over the services: connecting starts the same flow as `POST /tools/{id}/oauth/connect/`, keys go through
`keys.my_credentials_set` (write-only: a value is never shown again, not even after a refused save).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from core.errors import DomainError, NotFound, RuntimeToolError
from core.links import public_base
from tenants_app.selectors import membership_get, memberships_for_user
from tools_app import selectors
from tools_app.connections import grants, keys, oauth_flow

KEY_FIELD = "value:"  # form fields "value:<key>" carry the member's new values
TEMPLATE = "connections/home.html"


@never_cache
@login_required  # settings.LOGIN_URL: the member sign-in
def connections(request: HttpRequest) -> HttpResponse:
    memberships = list(memberships_for_user(user=request.user))
    slug = request.GET.get("tenant", "").strip() or (memberships[0].tenant.slug if len(memberships) == 1 else "")
    if not slug:
        return render(request, TEMPLATE, {"memberships": memberships, "tenant": None, "title": "My connections"})
    try:
        tenant = membership_get(user=request.user, tenant_slug=slug).tenant
    except NotFound:
        raise Http404("no such tenant") from None
    here = reverse("my-connections") + f"?tenant={tenant.slug}"
    if request.method == "POST":
        return _act(request, tenant, here)
    return render(request, TEMPLATE, {
        "memberships": memberships, "tenant": tenant, "title": "My connections",
        "rows": selectors.member_connections(tenant=tenant, user=request.user),
    })


def _act(request: HttpRequest, tenant: Any, here: str) -> HttpResponse:
    action, tool_id = request.POST.get("action", ""), request.POST.get("tool", "")
    try:
        if action == "connect":
            link = oauth_flow.oauth_connect(tenant=tenant, actor=request.user, tool_id=tool_id,
                                            base_url=public_base(request))
            return HttpResponseRedirect(str(link["authorize_url"]))
        if action == "disconnect":
            grants.oauth_disconnect(tenant=tenant, actor=request.user, tool_id=tool_id)
            messages.success(request, "Disconnected: your calls no longer use that account.")
        elif action == "set_keys":
            values = {k.removeprefix(KEY_FIELD): v for k, v in request.POST.items() if k.startswith(KEY_FIELD) and v}
            state = keys.my_credentials_set(tenant=tenant, actor=request.user, tool_id=tool_id, values=values)
            missing = ", ".join(state["missing"])
            messages.success(request, "Saved." + (f" Still to set: {missing}." if missing else ""))
        elif action == "clear_keys":
            keys.my_credentials_clear(tenant=tenant, actor=request.user, tool_id=tool_id)
            messages.success(request, "Your keys for that tool are cleared.")
        else:
            messages.error(request, f"unknown action {action[:40]!r}; accepted: connect, disconnect, set_keys, "
                                    "clear_keys")
    except (DomainError, RuntimeToolError) as exc:
        messages.error(request, f"Not saved: {exc.message}")
    return HttpResponseRedirect(here)
