"""Company sign-in pages: start at a provider (by link or by email domain), and the provider's callback."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import login
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods
from mozilla_django_oidc.utils import add_state_and_verifier_and_nonce_to_session

from identity_app import oidc, selectors, services
from identity_app.models import IdentityProvider

log = logging.getLogger(__name__)
FLOWS = "identity_flows"


def _safe_next(request: HttpRequest, candidate: str | None) -> str:
    if candidate and url_has_allowed_host_and_scheme(candidate, allowed_hosts={request.get_host()},
                                                     require_https=request.is_secure()):
        return candidate
    return str(settings.LOGIN_REDIRECT_URL)


def _refused(request: HttpRequest, message: str, *, status: int = 403) -> HttpResponse:
    context = dict(admin.site.each_context(request), title="Sign-in refused", message=message)
    return render(request, "identity/refused.html", context, status=status)


def _start(request: HttpRequest, provider: IdentityProvider, next_url: str) -> HttpResponse:
    try:
        auth = oidc.authorization_request(provider)
    except oidc.ProviderError as exc:
        services.signin_failed(provider=provider, reason=str(exc))
        return _refused(request, f"{provider.name}: {exc}", status=502)
    # The library's session record (state -> nonce, PKCE verifier), and ours (state -> provider, next).
    add_state_and_verifier_and_nonce_to_session(request, auth.state, {"nonce": auth.nonce, "code_challenge": "S256"},
                                                code_verifier=auth.code_verifier)
    flows = dict(request.session.get(FLOWS) or {})
    flows = dict(list(flows.items())[-20:])
    flows[auth.state] = {"provider": provider.pk, "next": next_url}
    request.session[FLOWS] = flows
    return HttpResponseRedirect(auth.url)


@require_GET
def sso_start(request: HttpRequest, provider_id: int) -> HttpResponse:
    """`/accounts/sso/<id>/`: off to the provider (the link on the sign-in page)."""
    provider = selectors.provider_for_signin(provider_id=provider_id)
    if provider is None:
        return _refused(request, "No such sign-in provider.", status=404)
    return _start(request, provider, _safe_next(request, request.GET.get("next")))


@require_http_methods(["GET", "POST"])
def sso_by_email(request: HttpRequest) -> HttpResponse:
    """`/accounts/sso/`: a company email address leads to its tenant's provider."""
    email = str(request.POST.get("email") or request.GET.get("email") or "").strip()
    next_url = _safe_next(request, request.POST.get("next") or request.GET.get("next"))
    provider = selectors.provider_for_email(email=email)
    if provider is None:
        return _refused(request, "No company sign-in is set up for that email domain; sign in with your "
                                 "username and password instead.", status=404)
    return _start(request, provider, next_url)


@require_GET
def sso_callback(request: HttpRequest) -> HttpResponse:
    """The provider's redirect back: the state's flow, the code exchanged and checked, the person signed in."""
    state = str(request.GET.get("state") or "")
    flows = dict(request.session.get(FLOWS) or {})
    oidc_states = dict(request.session.get("oidc_states") or {})
    flow, stored = flows.pop(state, None), oidc_states.pop(state, None)
    request.session[FLOWS], request.session["oidc_states"] = flows, oidc_states  # single use, whatever happens
    if flow is None or stored is None:
        return _refused(request, "This sign-in link is unknown or was already used; start again.", status=400)
    provider = selectors.provider_for_signin(provider_id=flow["provider"])
    if provider is None:
        return _refused(request, "This sign-in provider no longer exists.", status=400)
    if request.GET.get("error"):
        error = str(request.GET["error"])[:40]
        services.signin_failed(provider=provider, reason=f"the provider answered {error}")
        return _refused(request, f"{provider.name} did not sign you in ({error}).")
    try:
        claims = oidc.ProviderBackend(provider).exchange(code=str(request.GET.get("code") or ""),
                                                        nonce=stored["nonce"], code_verifier=stored["code_verifier"])
    except (oidc.ProviderError, SuspiciousOperation) as exc:
        services.signin_failed(provider=provider, reason=str(exc))
        return _refused(request, f"{provider.name}: {exc}")
    try:
        user, role = services.signin_complete(provider=provider, claims=claims)
    except services.SignInRefused as exc:
        services.signin_failed(provider=provider, reason=exc.message, subject=str(claims.get("sub") or ""))
        return _refused(request, exc.message)
    if role is None:
        services.signin_failed(provider=provider, reason="no group of this person gives a role in the tenant",
                               subject=str(claims.get("sub") or ""), user=user)
        return _refused(request, "None of your groups gives you access to this tenant; ask your administrator.")
    login(request, user, backend="identity_app.backends.PasswordBackend")
    request.session["identity_provider"] = provider.pk
    return HttpResponseRedirect(flow["next"])


def providers_context(request: Any) -> list[IdentityProvider]:
    return selectors.providers_for_login()


urlpatterns = [
    path("", sso_by_email, name="sso-by-email"),
    path("callback/", sso_callback, name="sso-callback"),
    path("<int:provider_id>/", sso_start, name="sso-start"),
]
