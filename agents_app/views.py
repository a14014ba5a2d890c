"""The chat playground: a page that talks to the chat API with the admin session.

Conversations persist: the page lists the user's recent ones and `?conversation=<id>` reopens one (its
transcript and approvals come from `GET /api/v1/conversations/<id>/`), so a reload resumes where it was.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from agents_app import selectors
from core.errors import NotFound
from tenants_app.selectors import last_used_membership, membership_get, memberships_for_user
from tenants_app.services import membership_mark_used

RECENT = 30  # conversations listed beside the chat


@login_required  # settings.LOGIN_URL: the member sign-in, not the staff-only admin login
@ensure_csrf_cookie
def playground(request: HttpRequest) -> HttpResponse:
    """Pick an agent of the user's tenant (?tenant=<slug>, or the only membership) and chat with it."""
    memberships = list(memberships_for_user(user=request.user))
    last = last_used_membership(user=request.user) if len(memberships) > 1 else None
    slug = request.GET.get("tenant", "").strip()
    if slug:
        try:
            membership = membership_get(user=request.user, tenant_slug=slug)
        except NotFound:
            raise Http404("no such tenant") from None
        if len(memberships) > 1 and (last is None or last.tenant_id != membership.tenant_id):
            membership_mark_used(tenant=membership.tenant, actor=request.user)  # where they land next time
    elif len(memberships) == 1:
        membership = memberships[0]
    elif last is not None:
        membership = last  # a member of several tenants lands in the one used last
    else:
        return render(request, "agents_app/playground.html", {"memberships": memberships, "tenant": None})
    tenant = membership.tenant
    agents = selectors.usable_agents(tenant=tenant, user=request.user).order_by("name")
    conversations = list(selectors.conversation_list(tenant=tenant, user=request.user)[:RECENT])
    current = None
    wanted = request.GET.get("conversation", "").strip()
    if wanted:
        try:
            current = selectors.conversation_get(tenant=tenant, user=request.user, conversation_id=wanted)
        except NotFound:
            raise Http404("no such conversation") from None
    return render(
        request,
        "agents_app/playground.html",
        {"memberships": memberships, "tenant": tenant, "agents": agents, "role": membership.role,
         "conversations": conversations, "current": current, "recent": RECENT},
    )
