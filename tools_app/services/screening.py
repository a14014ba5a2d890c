"""The screen on discovery: each function's findings (tools_app.runtime.screen), held or flagged as the tenant's
`tool_screen` policy says (hold | flag | off); an admin's approval covers one definition until its text changes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from tenants_app.models import Tenant
from tools_app.models import FunctionState, ScreenStatus, Tool, ToolFunction, ToolType
from tools_app.runtime import screen as rules

HOLD, FLAG, OFF = "hold", "flag", "off"
# Severities that change a function's status; `low` findings are shown for review only.
RAISING = ("high", "medium")


@dataclass(frozen=True)
class Others:
    """The tenant's other tools, their functions and qualified names: what a description may not shadow."""

    names: frozenset[str]
    qualified: frozenset[str]


def others_of(tool: Tool) -> Others:
    rows = (ToolFunction.objects.filter(tool__tenant_id=tool.tenant_id).exclude(tool_id=tool.pk)
            .exclude(state=FunctionState.REMOVED).values_list("tool__name", "name"))
    tool_names = Tool.objects.filter(tenant_id=tool.tenant_id).exclude(pk=tool.pk).values_list("name", flat=True)
    pairs = list(rows)
    return Others(names=frozenset([*tool_names, *(fn for _, fn in pairs)]),
                  qualified=frozenset(f"{t}__{fn}" for t, fn in pairs))


def screen_key(*, schema_hash: str, title: str) -> str:
    """What an approval of the screen covers: the definition (schema_hash) and the title, which the hash leaves out."""
    return hashlib.sha256(f"{schema_hash}\0{title}".encode()).hexdigest()


def findings_for(*, name: str, title: str, description: str, input_schema: Any, output_schema: Any,
                 annotations: Any, others: Others | None = None) -> list[dict[str, str]]:
    """The screen's findings on the upstream's own text of one function, as stored and served."""
    texts = rules.function_texts(name=name, title=title, description=description, input_schema=input_schema,
                                 output_schema=output_schema, annotations=annotations)
    found = rules.screen(texts, other_names=others.names if others else (),
                         other_qualified=others.qualified if others else ())
    return [f.as_dict() for f in found]


def verdict(*, findings: Iterable[dict[str, Any]], policy: str, approved: bool) -> str:
    """clear | flagged | held | approved, from the findings, the tenant's policy and a standing approval."""
    severity = rules.worst([f for f in findings if f.get("severity") in RAISING])
    if policy == OFF or severity is None:
        return ScreenStatus.CLEAR
    if approved:
        return ScreenStatus.APPROVED
    if severity == "high" and policy == HOLD:
        return ScreenStatus.HELD
    return ScreenStatus.FLAGGED


def policy_of(tenant: Tenant) -> str:
    return getattr(tenant, "tool_screen", HOLD) or HOLD


def screens(tool: Tool) -> bool:
    """Built-ins are Toolhub's own code: only what servers, catalogs and admins' HTTP tools say is screened."""
    return tool.type != ToolType.BUILTIN


def apply(row: ToolFunction, *, policy: str, others: Others | None) -> None:
    """Screen `row`'s upstream text now and set its findings and status (not saved). A held function whose
    definition is otherwise trusted (ACTIVE) becomes HELD; an approved or cleared one becomes ACTIVE again."""
    if policy == OFF:
        row.screen_findings, row.screen_status = [], ScreenStatus.CLEAR
    else:
        row.screen_findings = findings_for(name=row.name, title=row.title, description=row.description,
                                           input_schema=row.input_schema, output_schema=row.output_schema,
                                           annotations=row.annotations, others=others)
        approved = bool(row.screen_approved_hash) and row.screen_approved_hash == screen_key(
            schema_hash=row.schema_hash, title=row.title)
        row.screen_status = verdict(findings=row.screen_findings, policy=policy, approved=approved)
    row.screen_version = rules.ruleset().version
    if row.screen_status == ScreenStatus.HELD and row.state == FunctionState.ACTIVE:
        row.state = FunctionState.HELD
    elif row.screen_status != ScreenStatus.HELD and row.state == FunctionState.HELD:
        row.state = FunctionState.ACTIVE
        if not row.approved_hash:  # held at its first discovery, which trusts it but for the screen
            row.approved_hash, row.approved_definition = row.schema_hash, row.definition()


def approve(row: ToolFunction, *, actor: Any) -> None:
    """An admin's approval of the function's current definition covers its findings too (not saved)."""
    row.screen_approved_hash = screen_key(schema_hash=row.schema_hash, title=row.title)
    row.screen_approved_by = actor if getattr(actor, "pk", None) else None
    row.screen_approved_at = timezone.now()
    if row.screen_status in (ScreenStatus.HELD, ScreenStatus.FLAGGED):
        row.screen_status = ScreenStatus.APPROVED


SCREEN_FIELDS = ["screen_findings", "screen_status", "screen_version", "state", "approved_hash",
                 "approved_definition", "updated_at"]


@transaction.atomic
def rescreen_tenant(*, tenant: Tenant) -> int:
    """Screen every live function of the tenant again (after its policy changed); returns how many changed."""
    policy = policy_of(tenant)
    changed = 0
    tools = Tool.objects.filter(tenant=tenant).exclude(type=ToolType.BUILTIN)
    for tool in tools:
        others = others_of(tool)
        for row in ToolFunction.objects.select_for_update().filter(tool=tool).exclude(state=FunctionState.REMOVED):
            before = (row.screen_status, row.state, row.screen_findings)
            row.tool = tool
            apply(row, policy=policy, others=others)
            if (row.screen_status, row.state, row.screen_findings) != before:
                row.save(update_fields=SCREEN_FIELDS)
                changed += 1
        texts = tool.server_screen or {}
        if "key" in texts:  # the server's other texts as last discovered, under the new policy
            screen_server(tool, instructions=texts.get("instructions") or "", prompts=texts.get("prompts") or [],
                          resources=texts.get("resources") or [])
    return changed


def catalog_screen(*, title: str, description: str, variables: Iterable[Any] = (), policy: str = HOLD,
                   ) -> dict[str, Any]:
    """The screen on a market entry before it is installed: {status, findings} like a function's."""
    if policy == OFF:
        return {"status": ScreenStatus.CLEAR, "findings": []}
    texts = [("title", title or ""), ("description", description or "")]
    for i, var in enumerate(variables):
        if isinstance(var, dict) and isinstance(var.get("description"), str):
            texts.append((f"variables.{i}.description", var["description"]))
    findings = [f.as_dict() for f in rules.screen(texts)]
    return {"status": verdict(findings=findings, policy=policy, approved=False), "findings": findings}


def screen_out(row: ToolFunction) -> dict[str, Any]:
    """The API's `screen` of a function: {status, findings: [{rule, severity, field, excerpt}]}."""
    return {"status": row.screen_status or ScreenStatus.CLEAR,
            "findings": [{k: f.get(k, "") for k in ("rule", "severity", "field", "excerpt")}
                         for f in row.screen_findings or []]}


# --- what a server says besides its tools: instructions, prompts, resources ------------------------------------

def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def item_texts(kind: str, item: dict[str, Any]) -> list[tuple[str, str]]:
    """The screened texts of one prompt or resource (as discovery keeps it, or as a client is sent it)."""
    return rules.server_texts(**{kind: [item]})  # type: ignore[arg-type]


def item_key(kind: str, item: dict[str, Any]) -> str:
    """What an approval of one prompt or resource covers: the texts of it a model reads."""
    return _digest([kind, item_texts(kind, item)])


def screen_server(tool: Tool, *, instructions: str, prompts: list[dict[str, Any]],
                  resources: list[dict[str, Any]]) -> dict[str, Any]:
    """Screen the server's instructions, prompts and resources as discovered now and keep it on the tool (saved).

    A held prompt or resource is left out of the gateway's listings (`offered_items`) and the instructions are
    passed to no model anyway; an admin's approval (`approve_server`) covers these texts until they change."""
    policy = policy_of(tool.tenant) if screens(tool) else OFF
    texts = rules.server_texts(instructions=instructions, prompts=prompts, resources=resources)
    others = others_of(tool) if policy != OFF else None
    found = [] if policy == OFF else [f.as_dict() for f in rules.screen(
        texts, other_names=others.names if others else (), other_qualified=others.qualified if others else ())]
    before = dict(tool.server_screen or {})
    key = _digest(texts)
    items = [item_key("prompts", p) for p in prompts] + [item_key("resources", r) for r in resources]
    kept = {k: before[k] for k in ("approved_key", "approved_items", "approved_by", "approved_at") if k in before}
    screened: dict[str, Any] = {
        **kept, "status": verdict(findings=found, policy=policy, approved=before.get("approved_key") == key),
        "findings": found, "version": rules.ruleset().version, "key": key, "instructions": instructions,
        "prompts": prompts, "resources": resources, "items": items,
    }
    tool.server_screen = screened
    Tool.objects.in_tenant(tool.tenant_id).filter(pk=tool.pk).update(server_screen=screened)
    return screened


def server_screen_out(tool: Tool) -> dict[str, Any]:
    """The API's `server_screen` of a tool: {status, findings, approved_by, approved_at}."""
    data = tool.server_screen or {}
    return {"status": data.get("status") or ScreenStatus.CLEAR,
            "findings": [{k: f.get(k, "") for k in ("rule", "severity", "field", "excerpt")}
                         for f in data.get("findings") or []],
            "approved_by": (data.get("approved_by") or {}).get("username"), "approved_at": data.get("approved_at")}


@transaction.atomic
def approve_server(tool: Tool, *, actor: Any) -> dict[str, Any]:
    """An admin's approval of the server's current instructions, prompts and resources (who, when, which texts)."""
    tool = Tool.objects.select_for_update().get(pk=tool.pk)
    data = dict(tool.server_screen or {})
    data.update(approved_key=data.get("key", ""), approved_items=list(data.get("items") or []),
                approved_by={"id": getattr(actor, "pk", None), "username": getattr(actor, "username", "")},
                approved_at=timezone.now().isoformat())
    if data.get("status") in (ScreenStatus.HELD, ScreenStatus.FLAGGED):
        data["status"] = ScreenStatus.APPROVED
    tool.server_screen = data
    Tool.objects.in_tenant(tool.tenant_id).filter(pk=tool.pk).update(server_screen=data)
    return data


def offered_items(tool: Tool, kind: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prompts or resources (as listed to a client now) a model may be offered: one with a high finding is
    left out under the `hold` policy unless an admin approved that very text. Screened as listed, not as
    discovered: a text changed since the last discovery is judged on what it says now."""
    policy = policy_of(tool.tenant) if screens(tool) else OFF
    if policy != HOLD:
        return items
    approved = set((tool.server_screen or {}).get("approved_items") or [])
    out = []
    for item in items:
        found = rules.screen(item_texts(kind, item))
        if rules.worst(found) == "high" and item_key(kind, item) not in approved:
            continue
        out.append(item)
    return out
