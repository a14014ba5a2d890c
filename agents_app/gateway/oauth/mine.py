"""A member's own authorizations: `/oauth/authorizations/` lists the clients they authorized (which agent, last
used) and revokes one (POST), whatever their role."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from agents_app.gateway.oauth.authorizations import authorization_revoke, authorizations_of_user
from core.errors import NotFound
from tenants_app.models import Tenant


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def my_authorizations(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        tenant = Tenant.objects.filter(slug=request.POST.get("tenant", "")).first()
        try:
            if tenant is None:
                raise NotFound()
            authorization_revoke(tenant=tenant, actor=request.user, agent_id=request.POST.get("agent", ""),
                                 client_id=request.POST.get("client_id", ""), user_id=request.user.pk)
        except NotFound:
            messages.warning(request, "There was nothing left to revoke for that client.")
        else:
            messages.success(request, "Revoked: that client's access stops now.")
        return HttpResponseRedirect(reverse("oauth2_provider:my-authorizations"))
    return render(request, "oauth/my_authorizations.html", {
        **admin.site.each_context(request), "title": "Your authorized MCP clients",
        "authorizations": authorizations_of_user(user=request.user)})
