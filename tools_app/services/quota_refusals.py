"""Quota refusals, folded: a tenant hammering past its quota must not cost a database write per refused call.

What the audit trail records for refusals (docs/operators.md, "Quotas"):
- the FIRST refusal of each UTC minute for one (tenant, quota, tool, function, member, agent, via) is a full audit
  row, as any refused call (status denied, QUOTA_EXCEEDED, its arguments redacted, the quota's message), `call_count` 1;
- the refusals after it in the same minute for the same key are counted in Redis (one HINCRBY pipeline, no database
  write) and, once the minute is over, written as ONE row: status denied, QUOTA_EXCEEDED, `call_count` N (the refusals it
  stands for), the same tool, function, member, agent and via, `created_at` the last of them, arguments empty
  (each call's own arguments are not kept), its `error` naming the quota, the minute and the first row;
- metrics (`toolhub_tool_calls_total`, `toolhub_tool_call_errors_total`, `toolhub_quota_refusals_total`) count every
  refusal at once, in the process that refused it.
So every refused call is counted in the audit table (`Sum(call_count)`), the usage report and the audit stream (whose
record carries `count`), a minute or two late for the folded ones; no refused call is lost, and none counted twice:
a folded row's `call_uid` is derived from its key and how many of the key's refusals were recorded before it, so a
fold that stopped after its INSERT writes nothing the second time.

The fold runs from Celery beat (`tools.fold_quota_refusals`, every TOOLHUB_QUOTA_FOLD_S seconds) over the minutes
that ended at least a minute ago. Without REDIS_URL (the embedded single-process default) nothing is folded: every
refusal is its own row, as before. A call a person approved is never folded (its approval points at its row).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from core.process_state import PerProcess
from tools_app.models import CallStatus, ToolCall
from tools_app.runtime.result import QUOTA_EXCEEDED

logger = logging.getLogger(__name__)

MINUTE = 60
# How long a fold key outlives its last refusal (the fold takes it within minutes; this bounds what a stopped beat
# leaves behind).
KEY_TTL_S = 6 * 3600
_NAMESPACE = uuid.UUID("5b0f5c3e-3f0c-4a43-9d0e-8a1f2c6f7a10")


@dataclass(frozen=True)
class Refusal:
    """One refused call as the fold keys it."""

    tenant_id: int
    tool_id: int
    tool_name: str
    function: str
    actor_id: int | None
    agent_id: int | None
    via: str
    scope: str
    target: str
    limit: str
    minute: int

    def key(self, prefix: str) -> str:
        return (
            f"{prefix}r:{self.minute}:{self.tenant_id}:{self.scope}:{self.target}:{self.limit}:{self.tool_id}:"
            f"{self.actor_id or 0}:{self.agent_id or 0}:{self.via}:{self.function}"
        )


# redis is imported by the functions that use it: the call services import this module, and so every Django process's
# start (issue 35) would pay for redis (~0.3 s of CPU: its client pulls in OpenTelemetry's SDK), which only a refused
# call with REDIS_URL set needs.


def _client() -> Any:
    import redis  # on first use (see above)

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


_redis: PerProcess[Any] = PerProcess(_client)


def _prefix() -> str:
    return f"{settings.TOOLHUB_QUOTA_PREFIX}fold:"


def _index(prefix: str, minute: int) -> str:
    return f"{prefix}idx:{minute}"


def enabled() -> bool:
    return bool(settings.REDIS_URL) and bool(settings.TOOLHUB_QUOTA_FOLD_REFUSALS)


# KEYS: the refusal's key, its minute's index; ARGV: tool name, when, ttl. One command (not a MULTI of six): a
# refusal is the cheapest answer a web process gives, and a hammering tenant sends many.
_COUNT = """
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('HSETNX', KEYS[1], 'tool_name', ARGV[1])
redis.call('HSET', KEYS[1], 'last', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return n
"""


def count(refusal: Refusal, now: float) -> int | None:
    """Count one refusal under its key; the how-manieth of its minute it is (1: write its row), or None when the
    store could not count it (then the caller writes the row: nothing is lost)."""
    import redis  # on first use (see _client)

    prefix = _prefix()
    key = refusal.key(prefix)
    try:
        client = _redis.get()
        script = client.register_script(_COUNT)  # a local object (its sha1): EVALSHA, loaded once per server
        return int(script(keys=[key, _index(prefix, refusal.minute)], args=[refusal.tool_name, repr(now), KEY_TTL_S]))
    except (redis.RedisError, OSError) as exc:
        logger.warning("quota refusal not folded (its row is written): %s", type(exc).__name__)
        return None


def recorded(refusal: Refusal, call_id: Any) -> None:
    """The first refusal's row is stored (as `call_id`): the fold writes only the ones after it, naming that row."""
    import redis  # on first use (see _client)

    try:
        pipe = _redis.get().pipeline(transaction=True)
        pipe.hincrby(refusal.key(_prefix()), "done", 1)
        pipe.hset(refusal.key(_prefix()), "first", str(call_id))
        pipe.expire(refusal.key(_prefix()), KEY_TTL_S)
        pipe.execute()
    except (
        redis.RedisError,
        OSError,
    ):  # the fold then writes this one again as part of its row: counted, not lost
        logger.warning("quota refusal's first row stored but not marked recorded")


def _parse(key: str, prefix: str) -> Refusal:
    minute, tenant, scope, target, limit, tool, actor, agent, via, function = key[len(prefix) + 2 :].split(
        ":", 9
    )
    return Refusal(
        tenant_id=int(tenant),
        tool_id=int(tool),
        tool_name="",
        function=function,
        actor_id=int(actor) or None,
        agent_id=int(agent) or None,
        via=via,
        scope=scope,
        target=target,
        limit=limit,
        minute=int(minute),
    )


def fold(now: float | None = None) -> dict[str, int]:
    """Write one row per key for the refusals not recorded yet, in minutes that ended at least a minute before
    `now`; answers how many rows and refusals it wrote. Idempotent (see the module's docstring)."""
    if not enabled():
        return {"rows": 0, "refusals": 0}
    now = time.time() if now is None else now
    client, prefix = _redis.get(), _prefix()
    last_closed = int(now // MINUTE) - 2
    rows = refusals = 0
    for raw in client.scan_iter(match=f"{prefix}idx:*", count=500):
        index = raw.decode()
        minute = int(index.rsplit(":", 1)[1])
        if minute > last_closed:
            continue
        for member in client.smembers(index):
            key = member.decode()
            state = {k.decode(): v.decode() for k, v in client.hgetall(key).items()}
            n, done = int(state.get("n", 0)), int(state.get("done", 0))
            if n > done:
                wrote = _write(_parse(key, prefix), key, state, n - done, done)
                rows += wrote
                refusals += (n - done) if wrote else 0
                client.hincrby(key, "done", n - done)
            else:
                client.delete(key)
                client.srem(index, key)
        if not client.scard(index):
            client.delete(index)
    if rows:
        logger.info("quota refusals folded: %d row(s) for %d refusal(s)", rows, refusals)
    return {"rows": rows, "refusals": refusals}


def _write(refusal: Refusal, key: str, state: dict[str, str], pending: int, done: int) -> int:
    """The row for `pending` refusals of `key`; 0 when a fold before this one already wrote it (its uid exists)."""
    uid = uuid.uuid5(_NAMESPACE, f"{key}#{done}")
    if ToolCall.objects.filter(call_uid=uid).exists():
        return 0
    from tenants_app.models import Tenant
    from tools_app.models import Tool

    tenant = Tenant.objects.filter(pk=refusal.tenant_id).first()
    if tenant is None:
        return 0  # the tenant was deleted meanwhile: its audit went with it
    tool = Tool.objects.filter(pk=refusal.tool_id, tenant=tenant).first()
    when = datetime.fromtimestamp(float(state.get("last") or (refusal.minute + 1) * MINUTE), tz=UTC)
    at = time.strftime("%H:%M", time.gmtime(refusal.minute * MINUTE))
    where = f"{refusal.scope} {refusal.target!r}" if refusal.target else f"the {refusal.scope}"
    first = state.get("first")
    row = ToolCall(
        tenant=tenant,
        tool=tool,
        tool_name=(tool.name if tool else state.get("tool_name", ""))[:64],
        function=refusal.function[:128],
        actor_id=refusal.actor_id,
        agent_id=refusal.agent_id,
        via=refusal.via,
        title=(tool.name if tool else state.get("tool_name", ""))[:200],
        arguments={},
        status=CallStatus.DENIED,
        error_code=QUOTA_EXCEEDED,
        call_count=pending,
        created_at=when,
        call_uid=uid,
        error=(
            f"{pending} call(s) refused by {where}'s {refusal.limit.replace('_', ' ')} limit in the UTC minute "
            f"{at}, after the first (call #{first})"
            if first
            else f"{pending} call(s) refused by {where}'s {refusal.limit.replace('_', ' ')} limit in the UTC minute {at}"
        )
        + "; folded into this row: counted, their arguments not kept",
    )
    row._metrics_counted = True  # type: ignore[attr-defined]  # each was counted when it was refused
    try:
        with transaction.atomic():
            row.save(force_insert=True)
    except IntegrityError:
        # A missing member/agent (deleted meanwhile): the references are dropped, the count kept.
        row.pk = None
        row.actor_id = row.agent_id = None
        with transaction.atomic():
            row.save(force_insert=True)
    return 1
