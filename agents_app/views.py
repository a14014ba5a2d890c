"""The chat playground: a page that talks to the chat API with the admin session."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from agents_app import selectors
from core.errors import NotFound
from tenants_app.selectors import membership_get, memberships_for_user


@login_required(login_url="admin:login")
@ensure_csrf_cookie
def playground(request: HttpRequest) -> HttpResponse:
    """Pick an agent of the user's tenant (?tenant=<slug>, or the only membership) and chat with it."""
    memberships = list(memberships_for_user(user=request.user))
    slug = request.GET.get("tenant", "").strip()
    if slug:
        try:
            membership = membership_get(user=request.user, tenant_slug=slug)
        except NotFound:
            raise Http404("no such tenant") from None
    elif len(memberships) == 1:
        membership = memberships[0]
    else:
        return render(request, "agents_app/playground.html", {"memberships": memberships, "tenant": None})
    tenant = membership.tenant
    agents = selectors.usable_agents(tenant=tenant, user=request.user).order_by("name")
    return render(
        request,
        "agents_app/playground.html",
        {"memberships": memberships, "tenant": tenant, "agents": agents, "role": membership.role},
    )
