"""`{% sso_providers %}`: the company sign-in links for /accounts/login/ (tenants_app's template loads it by name,
so tenants_app imports nothing of identity_app)."""

from __future__ import annotations

from typing import Any

from django import template

from identity_app import selectors

register = template.Library()


@register.inclusion_tag("identity/login_links.html", takes_context=True)
def sso_providers(context: Any) -> dict[str, Any]:
    request = context.get("request")
    return {"providers": selectors.providers_for_login(), "next": context.get("next", ""),
            "sso_required": getattr(request, "sso_required", "")}
