"""The hot path's identity lookups (API token -> user, user + tenant -> membership), cached briefly.

Every entry sits under one generation number; any change to a token, user, tenant or membership bumps it,
so a revoked token, a removed member or a changed role takes effect on the next request in every process
sharing the cache (Redis in production). TOOLHUB_AUTH_CACHE_S bounds how long an entry lives anyway.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from core import hotcache
from tenants_app.models import Membership, Tenant

T = TypeVar("T")
_MISSING = object()


def bump_generation(**kwargs: Any) -> None:
    """Forget every cached identity lookup (and every hot-path snapshot that depends on identities or
    grants): now, and again after commit (a request that re-cached the old rows between the two sees them
    dropped)."""
    hotcache.bump(hotcache.AUTH)


def cached(kind: str, key: str, load: Callable[[], T]) -> T:
    """`load()`'s value (None, a model instance or a tuple of them), from this process's memory, else the shared
    cache, else the database; valid while the identity generation stands, TOOLHUB_AUTH_CACHE_S at most.

    Warm, this costs no round trip of its own: the generation is read once per request (core.hotcache).
    Each caller gets private copies of the instances (and of the relations they carry): a request that sets
    an attribute (Django's permission caches on a user, a view's tenant) never changes what another sees.
    """
    ttl = settings.TOOLHUB_AUTH_CACHE_S
    if ttl <= 0:
        return load()
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]

    def shared() -> T:
        full = f"toolhub:{kind}:{hotcache.generations(hotcache.AUTH)[0]}:{digest}"
        hit = cache.get(full, _MISSING)
        if hit is not _MISSING:
            return cast(T, hit)  # what load() returned when it was cached
        value = load()
        cache.set(full, value, timeout=ttl)
        return value

    return cast(T, _private(hotcache.remembered(f"auth-{kind}", digest, (hotcache.AUTH,), shared, ttl=ttl)))


def _private(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_private(item) for item in value)
    if isinstance(value, Model):
        return _copy(value, depth=1)
    return value


def _copy(instance: Model, depth: int) -> Model:
    """A shallow copy with its own state and its own related objects (`depth` levels): what copy.copy does
    through Model.__reduce__, at a fraction of the cost."""
    mine = instance.__class__.__new__(instance.__class__)
    mine.__dict__.update(instance.__dict__)
    state = mine._state = ModelState()
    state.db, state.adding = instance._state.db, instance._state.adding
    state.fields_cache = {
        name: _copy(related, depth - 1) if depth > 0 and isinstance(related, Model) else related
        for name, related in instance._state.fields_cache.items()
    }
    return mine


class CachedTokenAuthentication(TokenAuthentication):
    """DRF token auth with the token -> user lookup cached (keys are hashed; the token never is a cache key)."""

    def likely_user_pk(self, request: Any) -> Any:
        """The user this request's token named when this process last looked it up (whatever has changed
        since), or None: no round trip, no check. core.api counts the throttle ahead for that user and takes
        the count back unless authentication proper names the same user."""
        auth = get_authorization_header(request).split()
        if len(auth) != 2 or auth[0].lower() != self.keyword.lower().encode():
            return None
        try:
            key = auth[1].decode()
        except UnicodeError:
            return None
        found = hotcache.peek("auth-token", hashlib.sha256(key.encode()).hexdigest()[:32])
        return found[0].pk if isinstance(found, tuple) else None

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        def load() -> tuple[Any, Any] | None:
            token = Token.objects.select_related("user").filter(key=key).first()
            return (token.user, token) if token is not None else None

        found = cached("token", key, load)
        if found is None:
            raise AuthenticationFailed("Invalid token.")
        if not found[0].is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return found


def connect() -> None:
    from guardian.models import GroupObjectPermission, UserObjectPermission

    # Object grants (use_tool, use_agent) and group membership decide what a user may use: the same bump.
    for model in (Token, get_user_model(), Tenant, Membership, UserObjectPermission, GroupObjectPermission):
        post_save.connect(bump_generation, sender=model, dispatch_uid=f"authcache-save-{model.__name__}")
        post_delete.connect(bump_generation, sender=model, dispatch_uid=f"authcache-delete-{model.__name__}")
    m2m_changed.connect(bump_generation, sender=get_user_model().groups.through, dispatch_uid="authcache-groups")
    m2m_changed.connect(bump_generation, sender=get_user_model().user_permissions.through,
                        dispatch_uid="authcache-user-perms")
