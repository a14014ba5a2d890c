"""Quotas: their writes (owners and admins), and the one admission check every call passes (tools_app.services.invoke).

A call counts against every quota that applies to it: the tenant's, its member's, its agent's (when it comes
through one) and its tool's. For member, agent and tool, a quota naming the target overrides the scope's default
(the quota of that scope with an empty target), which otherwise applies to each member, agent or tool on its own.
The counters are tools_app.runtime.quotas: Redis when REDIS_URL is set (every process agrees), else this process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from core import hotcache, metrics
from core.codes import ApiCode
from core.errors import Conflict, NotFound, ValidationFailed
from core.ids import as_id
from core.process_state import PerProcess
from tenants_app.models import Membership, Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors
from tools_app.models import Quota, QuotaScope, Tool
from tools_app.runtime import quotas as counters
from tools_app.runtime.result import QUOTA_EXCEEDED

logger = logging.getLogger(__name__)

LIMITS = ("per_minute", "per_day", "concurrent")
UNSET: Any = object()


def store_errors() -> tuple[type[Exception], ...]:
    """What a counter store that cannot answer raises (Redis down, a timeout): the call is admitted and the failure
    logged. A function, evaluated only when something was raised: redis is imported with the store that uses it, not
    by every Django process's start, which imports this module through the call services (issue 35)."""
    import redis

    return (redis.RedisError, OSError)


class InvalidQuota(ValidationFailed):
    code = ApiCode.INVALID_QUOTA


@dataclass(frozen=True)
class QuotaInput:
    scope: Any = UNSET
    target: Any = UNSET
    per_minute: Any = UNSET
    per_day: Any = UNSET
    concurrent: Any = UNSET


# --- writes -------------------------------------------------------------------------------------------------


@transaction.atomic
def quota_create(*, tenant: Tenant, actor: Any, data: QuotaInput) -> Quota:
    """A quota of `tenant` (owners and admins); scope, target and at least one limit are checked here."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    quota = Quota(tenant=tenant)
    _apply(tenant, quota, data, creating=True)
    return _saved(tenant, quota)


@transaction.atomic
def quota_update(*, tenant: Tenant, actor: Any, quota_id: Any, changes: QuotaInput) -> Quota:
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    quota = selectors.quota_get(tenant=tenant, quota_id=quota_id)
    _apply(tenant, quota, changes, creating=False)
    return _saved(tenant, quota)


@transaction.atomic
def quota_delete(*, tenant: Tenant, actor: Any, quota_id: Any) -> None:
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    selectors.quota_get(tenant=tenant, quota_id=quota_id).delete()
    hotcache.bump_tenant(tenant.pk)


def _saved(tenant: Tenant, quota: Quota) -> Quota:
    try:
        with transaction.atomic():
            quota.save()
    except IntegrityError:
        raise Conflict(f"the tenant already has a {quota.scope} quota for {quota.target or 'every target'!r}; "
                       "change that one", details={"scope": quota.scope, "target": quota.target}) from None
    hotcache.bump_tenant(tenant.pk)  # the admission check reads quotas from this process's memory
    return quota


def _apply(tenant: Tenant, quota: Quota, data: QuotaInput, *, creating: bool) -> None:
    if data.scope is not UNSET or creating:
        scope = "" if data.scope is UNSET else str(data.scope or "")
        if scope not in QuotaScope.values:
            raise InvalidQuota(f"unknown scope {scope!r}; accepted: {', '.join(QuotaScope.values)}",
                               details={"field": "scope", "accepted": list(QuotaScope.values)})
        if not creating and scope != quota.scope:
            raise InvalidQuota("a quota's scope cannot change; delete it and create another",
                               details={"field": "scope"})
        quota.scope = scope
    if data.target is not UNSET or creating:
        quota.target, quota.target_id = _target(tenant, quota.scope, "" if data.target is UNSET else data.target)
    for name in LIMITS:
        value = getattr(data, name)
        if value is UNSET:
            continue
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidQuota(f"{name} must be a whole number, 0 or more (or null for no limit); got {value!r}",
                               details={"field": name})
        setattr(quota, name, value)
    if all(getattr(quota, name) is None for name in LIMITS):
        raise InvalidQuota(f"set at least one of {', '.join(LIMITS)}", details={"fields": list(LIMITS)})


def _target(tenant: Tenant, scope: str, target: Any) -> tuple[str, int | None]:
    """The stored target and the id its counters use; a target of another tenant is as missing as an unknown one."""
    text = str(target if target is not None else "").strip()
    if scope == QuotaScope.TENANT:
        if text:
            raise InvalidQuota("a tenant quota has no target (leave it empty)", details={"field": "target"})
        return "", tenant.pk
    if not text:
        return "", None  # the scope's default: each member, agent or tool
    if scope == QuotaScope.MEMBER:
        user = get_user_model().objects.filter(username=text).first()
        if user is None or not Membership.objects.filter(tenant=tenant, user=user).exists():
            raise NotFound(f"no member {text!r} in this tenant", details={"field": "target"})
        return text, user.pk
    model: Any = Tool if scope == QuotaScope.TOOL else _agent_model()
    found = model.objects.filter(tenant=tenant, pk=as_id(text) or 0).values_list("pk", flat=True).first()
    if found is None:
        raise NotFound(f"no {scope} {text!r} in this tenant", details={"field": "target"})
    return str(found), int(found)


def _agent_model() -> Any:
    # The tool layer imports no agents (import-linter); the agent model is known by the label ToolCall's own
    # foreign key uses.
    return apps.get_model("agents_app", "Agent")


# --- admission ----------------------------------------------------------------------------------------------


class QuotaExceeded(Exception):
    """A call refused by a quota: what `details` of the refusal says and the seconds to wait."""

    def __init__(self, spent: counters.Exceeded, now: float) -> None:
        self.spent = spent
        self.now = now
        self.retry_after = spent.retry_after(now)
        reset = datetime.fromtimestamp(spent.reset_at, tz=UTC).isoformat().replace("+00:00", "Z")
        self.details = {"scope": spent.scope, "target": spent.target, "limit": spent.limit,
                        "allowed": spent.allowed, "reset_at": reset, "retry_after": self.retry_after}
        where = f"{spent.scope} {spent.target!r}" if spent.target else f"the {spent.scope}"
        super().__init__(f"quota exceeded: {where} allows {spent.allowed} call(s) {spent.limit.replace('_', ' ')}; "
                         f"it resets at {reset} (retry after {self.retry_after}s)")
        self.code = QUOTA_EXCEEDED


def _limits_of(tenant: Tenant) -> tuple[Quota, ...]:
    return tuple(hotcache.remembered("quotas", tenant.pk, (hotcache.tenant_scope(tenant.pk),),
                                     lambda: tuple(selectors.quota_list(tenant=tenant))))


def applicable(*, tenant: Tenant, actor: Any, tool: Tool, agent: Any) -> list[counters.Limit]:
    """The quotas one call counts against, as counter limits (named targets override their scope's default)."""
    quotas = _limits_of(tenant)
    if not quotas:
        return []
    ids = {QuotaScope.TENANT: tenant.pk, QuotaScope.MEMBER: getattr(actor, "pk", None),
           QuotaScope.AGENT: getattr(agent, "pk", None), QuotaScope.TOOL: tool.pk}
    out: list[counters.Limit] = []
    for scope, target_id in ids.items():
        if target_id is None:
            continue
        mine = [q for q in quotas if q.scope == scope]
        chosen = next((q for q in mine if q.target_id == target_id), None)
        if chosen is None and scope != QuotaScope.TENANT:
            chosen = next((q for q in mine if q.target == ""), None)
        if chosen is None:
            continue
        out.append(counters.Limit(scope=str(scope), key=f"{tenant.pk}:{scope}:{target_id}",
                                  per_minute=chosen.per_minute, per_day=chosen.per_day,
                                  concurrent=chosen.concurrent, target=chosen.target or _shown(scope, actor, agent, tool)))
    return out


def _shown(scope: str, actor: Any, agent: Any, tool: Tool) -> str:
    """The target a default quota is counted for, as the API names it (a username, an agent or tool id)."""
    if scope == QuotaScope.MEMBER:
        return str(getattr(actor, "username", "") or "")
    if scope == QuotaScope.AGENT:
        return str(getattr(agent, "pk", "") or "")
    return str(tool.pk) if scope == QuotaScope.TOOL else ""


def clock() -> float:
    """Now, for the quota windows (UTC minute and day); one place, so tests can keep a call away from a window's end."""
    return time.time()


@contextmanager
def admitted(*, tenant: Tenant, actor: Any, tool: Tool, agent: Any, counted: bool = False) -> Iterator[None]:
    """Count one call against its quotas for as long as it runs; raises QuotaExceeded when one is spent.

    `counted`: a later round of a call already counted when it began (a 2026-07-28 server's questions answered by
    the caller): it takes no minute or day, only a concurrent slot while it runs.

    A store that cannot be reached admits the call (logged): a Redis outage must not stop every tool call.
    """
    limits = applicable(tenant=tenant, actor=actor, tool=tool, agent=agent)
    if counted:
        limits = [replace(limit, per_minute=None, per_day=None) for limit in limits if limit.concurrent is not None]
    if not limits:
        yield
        return
    now = clock()
    try:
        got = store().acquire(limits, now)
    except store_errors() as exc:  # the store is down: admit, say so
        logger.warning("quota store unavailable, call admitted: %s", type(exc).__name__)
        yield
        return
    if isinstance(got, counters.Exceeded):
        metrics.QUOTA_REFUSALS.labels(str(tenant.pk), tool.name, got.scope).inc()
        raise QuotaExceeded(got, now)
    try:
        yield
    finally:
        try:
            got.release()
        except store_errors() as exc:
            logger.warning("quota slot not released (it expires on its own): %s", type(exc).__name__)


def headroom(*, tenant: Tenant) -> list[dict[str, Any]]:
    """Each quota of the tenant with what is used now in its current windows (named targets and the tenant's)."""
    out = []
    for quota in _limits_of(tenant):
        used: dict[str, int] = {}
        if quota.target_id is not None:
            limit = counters.Limit(scope=quota.scope, key=f"{tenant.pk}:{quota.scope}:{quota.target_id}",
                                   per_minute=quota.per_minute, per_day=quota.per_day, concurrent=quota.concurrent)
            try:
                used = store().usage(limit, clock())
            except store_errors():
                used = {}
        out.append({"quota": quota, "used": used,
                    "limits": {name: getattr(quota, name) for name in LIMITS if getattr(quota, name) is not None}})
    return out


def _make_store() -> counters.Counters:
    if settings.REDIS_URL:
        import redis  # on first use (see store_errors)

        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        return counters.RedisCounters(client, prefix=settings.TOOLHUB_QUOTA_PREFIX)
    return counters.MemoryCounters()


_store: PerProcess[counters.Counters] = PerProcess(_make_store)


def store() -> counters.Counters:
    """This process's counter store (made again in a forked child)."""
    return _store.get()
