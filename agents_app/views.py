"""The chat playground: a page that talks to the chat API with the admin session.

Conversations persist: the page lists the user's recent ones and `?conversation=<id>` reopens one (its
transcript and approvals come from `GET /api/v1/conversations/<id>/`), so a reload resumes where it was.

Tool search: `?agent=<id>&find=<question>` shows what `search_functions` finds for that question on the agent's
gateway, for this member (agents_app.gateway.search: the same index, links and roles a gateway client gets), and
whether its gateway clients get search at all; chat keeps its own routing.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from agents_app import selectors
from agents_app.models import Agent
from core.errors import NotFound
from tenants_app.selectors import last_used_membership, membership_get, memberships_for_user
from tenants_app.services import membership_mark_used

RECENT = 30  # conversations listed beside the chat
FIND_LIMIT = 8  # functions shown for a tool search question (search_functions' default)
MAX_FIND_CHARS = 300


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
         "conversations": conversations, "current": current, "recent": RECENT,
         "search": _search(request, membership, agents)},
    )


def _search(request: HttpRequest, membership: Any, agents: QuerySet[Agent]) -> dict[str, Any] | None:
    """What the gateway's `search_functions` finds for `?find=` on `?agent=` (None without a question)."""
    query = request.GET.get("find", "").strip()[:MAX_FIND_CHARS]
    raw = request.GET.get("agent", "")
    agent = agents.filter(pk=int(raw)).first() if raw.isdigit() else None
    if not query or agent is None:
        return None
    from agents_app.gateway import search
    from agents_app.gateway.listing import listing
    from agents_app.gateway.principal import Principal

    principal = Principal(user=request.user, tenant=membership.tenant, role=membership.role, agent=agent)
    made = listing(principal)
    return {"agent": agent, "query": query, "enabled": search.enabled(principal, made), "offered": len(made.functions),
            "found": search.run_search(principal, query, FIND_LIMIT)}
