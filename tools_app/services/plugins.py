"""Registered tools' hooks on the Django side: prompt context, call titles, refusals, and trial runs."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from tenants_app.models import Tenant
from tools_app.models import Tool, ToolType
from tools_app.runtime import registry
from tools_app.runtime.plugin import ApprovalCard
from tools_app.runtime.registry import ToolSpec
from tools_app.runtime.result import ToolResult
from tools_app.wiring.specs import builtin_context

log = logging.getLogger(__name__)
CONTEXT_CHARS = 4000  # per tool: a plugin cannot flood the system prompt


def spec_for(tool: Tool) -> ToolSpec | None:
    """The registry entry behind a BUILTIN row (None for other types or a tool no longer installed)."""
    if tool.type != ToolType.BUILTIN:
        return None
    try:
        return registry.get_tool(tool.builtin_name)
    except KeyError:
        return None


def configured_name(tool: Tool, function: str) -> str:
    return tool.name if tool.type == ToolType.BUILTIN else f"{tool.name}.{function}"


def call_title(tool: Tool, function: str, arguments: Any) -> str:
    """How one call is named in chat events and its audit row: the tool's call_title hook, else its name."""
    spec = spec_for(tool)
    name = configured_name(tool, function)
    return registry.call_title(spec, arguments, name) if spec is not None else name


def refusal(*, tenant: Tenant, actor: Any, tool: Tool) -> str | None:
    """The tool's up-front refusal for this user (its refusal hook, or no user where one is required)."""
    spec = spec_for(tool)
    if spec is None or not (spec.plugin.requires_user or "refusal" in spec.hooks):
        return None
    ctx = builtin_context(tenant, actor)
    if spec.plugin.requires_user and ctx.user is None:
        return "this tool needs a signed-in user and the call has none"
    if "refusal" not in spec.hooks:
        return None
    try:
        reason = spec.plugin.refusal(ctx)
    except Exception:  # a broken hook refuses rather than letting the call through unchecked
        log.exception("refusal hook of %s failed", spec.name)
        return f"{spec.name} could not check whether you may use it"
    return str(reason) if reason else None


def before_approval(*, tenant: Tenant, actor: Any, tool: Tool, arguments: Any) -> ApprovalCard:
    """What the approval card shows, or a refusal before anyone is asked (the before_approval hook)."""
    spec = spec_for(tool)
    if spec is None or "before_approval" not in spec.hooks:
        return ApprovalCard()
    try:
        from tools_app.runtime.plugin import parse_arguments

        args = parse_arguments(spec.name, spec.args_model, arguments if arguments is not None else {})
        card = spec.plugin.before_approval(args, builtin_context(tenant, actor))
    except Exception as exc:  # noqa: BLE001 - bad arguments are refused by the call itself; a broken hook shows no card text
        log.info("before_approval of %s gave no card: %s", spec.name, type(exc).__name__)
        return ApprovalCard()
    if card is None:
        return ApprovalCard()
    return ApprovalCard(text=str(card.text or "")[:500], refuse=str(card.refuse or ""))


def provided_context(*, tenant: Tenant, actor: Any, tools: Iterable[Tool]) -> str:
    """The text registered tools add to an agent's system prompt for this user (provide_context hooks)."""
    parts: list[str] = []
    ctx = None
    for tool in sorted(tools, key=lambda t: t.name):
        spec = spec_for(tool)
        if spec is None or "provide_context" not in spec.hooks:
            continue
        ctx = ctx or builtin_context(tenant, actor)
        try:
            text = spec.plugin.provide_context(ctx)
        except Exception:
            log.exception("provide_context of %s failed", spec.name)
            continue
        if text and str(text).strip():
            parts.append(str(text).strip()[:CONTEXT_CHARS])
    return "\n\n".join(parts)


# --- trial runs -----------------------------------------------------------------------------------

_WRITE_SQL = re.compile(r'^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+["`]?([\w.]+)', re.IGNORECASE)


@dataclass
class Changes:
    """What a trial run changed before it was rolled back: ORM objects, and write statements per table."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    statements: dict[str, dict[str, int]] = field(default_factory=dict)
    cap: int = 200

    def add(self, model: Any, pk: Any, action: str) -> None:
        if len(self.objects) < self.cap:
            self.objects.append({"model": model._meta.label_lower, "pk": pk, "action": action})

    def as_dict(self) -> dict[str, Any]:
        return {"objects": self.objects, "statements": self.statements,
                "total_statements": sum(n for per in self.statements.values() for n in per.values())}


_recording: contextvars.ContextVar[Changes | None] = contextvars.ContextVar("toolhub_trial_run", default=None)


def _saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    changes = _recording.get()
    if changes is not None:
        changes.add(sender, instance.pk, "created" if created else "updated")


def _deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    changes = _recording.get()
    if changes is not None:
        changes.add(sender, instance.pk, "deleted")


def _m2m(sender: Any, instance: Any, action: str, **kwargs: Any) -> None:
    changes = _recording.get()
    if changes is not None and action.startswith("post_"):
        changes.add(type(instance), instance.pk, f"m2m_{action[5:]}")


post_save.connect(_saved, weak=False, dispatch_uid="toolhub_trial_run_save")
post_delete.connect(_deleted, weak=False, dispatch_uid="toolhub_trial_run_delete")
m2m_changed.connect(_m2m, weak=False, dispatch_uid="toolhub_trial_run_m2m")


@contextlib.contextmanager
def _recorded() -> Iterator[Changes]:
    changes = Changes()

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        match = _WRITE_SQL.match(sql or "")
        if match:
            verb = match.group(1).split()[0].upper()
            per = changes.statements.setdefault(match.group(2).strip('"`'), {})
            per[verb] = per.get(verb, 0) + (len(params) if many and params is not None else 1)
        return execute(sql, params, many, context)

    token = _recording.set(changes)
    try:
        with connection.execute_wrapper(count):
            yield changes
    finally:
        _recording.reset(token)


def trial_run(spec: ToolSpec, tool: Tool, function: str, arguments: Any, actor: Any) -> tuple[ToolResult, Changes]:
    """Run a tool that a rollback undoes inside a transaction that is always rolled back; say what changed.

    Nothing the tool wrote is kept, and work it queued with `transaction.on_commit` never runs.
    """
    ctx = builtin_context(tool.tenant, actor, dry_run=True)
    with transaction.atomic():
        with _recorded() as changes:
            result = registry.invoke_tool(spec.name, function, arguments, ctx)
        transaction.set_rollback(True)
    return result, changes
