"""The consent page after sign-in: it names the client, the tenant and the agent and what the client may do;
allowing issues a code bound to that one agent, denying sends the client `access_denied` and stores nothing
(either answer only to a redirect_uri the client registered),
and a member without access to the agent is refused there (django-oauth-toolkit's authorization view)."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlsplit

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from oauth2_provider.exceptions import FatalClientError, OAuthToolkitError
from oauth2_provider.models import get_application_model
from oauth2_provider.views import AuthorizationView
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error, MismatchingRedirectURIError

from agents_app.gateway.principal import Principal, resolve
from agents_app.gateway.resource import SCOPE_DESCRIPTION, parse_agent_resource
from core.errors import NotFound
from core.links import public_base


def _target(request: HttpRequest, resources: list[str]) -> tuple[str, str] | None:
    """(tenant slug, agent id) named by the request's one resource indicator, which must be an agent URL here."""
    if len(resources) != 1:
        return None
    return parse_agent_resource(resources[0], public_base(request))


def _principal(user: Any, target: tuple[str, str]) -> Principal | None:
    """The signed-in member's standing at that agent, or None when they may not use it (no membership, no
    such agent, not granted): one answer for all, as everywhere."""
    try:
        return resolve(user=user, tenant_slug=target[0], agent_id=target[1])
    except NotFound:
        return None


class ConsentView(AuthorizationView):
    template_name = "oauth/consent.html"
    principal: Principal | None = None

    def _invalid_target(self, application: Any, redirect_uri: str, state: str | None) -> HttpResponse:
        error = CustomOAuth2Error(error="invalid_target", state=state,
                                  description="resource must be one Toolhub agent's gateway URL")
        return cast(HttpResponse, self.error_response(OAuthToolkitError(error=error, redirect_uri=redirect_uri), application))

    def _refused(self, request: HttpRequest, application: Any) -> HttpResponse:
        return render(request, "oauth/consent_refused.html", {
            **admin.site.each_context(request), "title": "No access to this agent",
            "client_name": application.name if application else ""}, status=403)

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Consent is asked every time: an earlier grant for one agent must never answer for another
        # (django-oauth-toolkit's approval_prompt=auto compares scopes only).
        if "approval_prompt" in request.GET:
            query = request.GET.copy()
            query.pop("approval_prompt")
            request.GET = query  # type: ignore[assignment]  # a mutable copy, read only from here on
        try:
            _scopes, credentials = self.validate_authorization_request(request)
        except OAuthToolkitError as error:
            return cast(HttpResponse, self.error_response(error, application=None))
        application = get_application_model().objects.get(client_id=credentials["client_id"])
        target = _target(request, request.GET.getlist("resource"))
        if target is None:
            return self._invalid_target(application, credentials["redirect_uri"], credentials.get("state"))
        self.principal = _principal(request.user, target)
        if self.principal is None:
            return self._refused(request, application)
        return cast(HttpResponse, super().get(request, *args, **kwargs))

    def form_valid(self, form: Any) -> HttpResponse:
        # The hidden fields came back from the browser: the resource and the member's access are checked again.
        application = get_application_model().objects.filter(client_id=form.cleaned_data["client_id"]).first()
        if application is None:
            return self._refused(self.request, None)
        redirect_uri = form.cleaned_data.get("redirect_uri") or ""
        if not application.redirect_uri_allowed(redirect_uri):
            # Deny (and a refused resource) redirect too: the edited redirect_uri is refused exactly as Allow's
            # code exchange refuses it (oauthlib's mismatching_redirect_uri page), never followed.
            mismatch = MismatchingRedirectURIError(state=form.cleaned_data.get("state"))
            return cast(HttpResponse, self.error_response(FatalClientError(error=mismatch), application))
        target = _target(self.request, (form.cleaned_data.get("resource") or "").split())
        if target is None:
            return self._invalid_target(application, form.cleaned_data["redirect_uri"], form.cleaned_data.get("state"))
        if form.cleaned_data.get("allow") and _principal(self.request.user, target) is None:
            return self._refused(self.request, application)
        return cast(HttpResponse, super().form_valid(form))

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context.update(admin.site.each_context(self.request))
        principal = self.principal
        if principal is not None:
            redirect = urlsplit(str(context.get("redirect_uri") or ""))
            application: Any = context.get("application")
            documented = getattr(application, "registration_source", "") == "cimd"
            context.update(
                title="Authorize an MCP client", agent=principal.agent, tenant=principal.tenant,
                role=principal.role.value, may_call=principal.may_call, permission=SCOPE_DESCRIPTION,
                redirect_host=redirect.netloc,
                # A metadata document's URL is an identity the client proved by serving it; a registered name is not.
                client_document=application.client_id if documented else "")
        return context
