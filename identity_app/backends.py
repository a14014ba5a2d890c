"""Password sign-in, refused for members whose tenant requires company sign-in (the members' login, the admin's
login, and anything else that authenticates with a password); platform operators (superusers) keep it."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from identity_app import selectors, services


class PasswordBackend(ModelBackend):
    """Django's ModelBackend, but a correct password of an SSO-enforced member still signs nobody in."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> Any:
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None or user.is_superuser:
            return user
        provider = selectors.enforcing_provider_for(user=user)
        if provider is None:
            return user
        services.signin_failed(provider=provider, user=user,
                               reason="password sign-in refused: the tenant requires company sign-in")
        if request is not None:
            request.sso_required = provider.name  # type: ignore[attr-defined]  # the login page says where to go
        # PermissionDenied stops Django trying the next backend: the answer is "no", not "unknown".
        raise PermissionDenied(f"sign in with {provider.name}")
