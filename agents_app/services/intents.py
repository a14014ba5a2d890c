"""Intent tree writes: nodes with their examples and function refs, import, and storing example embeddings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from agents_app.errors import IntentError, IntentHasChildren, IntentVersionConflict
from agents_app.intents import selectors, tasks
from agents_app.models import IntentExample, IntentKind, IntentLevel, IntentNode, IntentStatus
from core.errors import NotFound
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app.models import ToolFunction

CODE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
MAX_EXAMPLES = 200
MAX_EXAMPLE_CHARS = 500
MAX_FUNCTIONS = 100
LEVEL_RANK = {IntentLevel.DOMAIN: 0, IntentLevel.CATEGORY: 1, IntentLevel.TOPIC: 2}
_UNSET: Any = object()


@dataclass
class IntentInput:
    """Fields of a node; None (or _UNSET for parent) keeps the stored value on update."""

    code: str | None = None
    name: str | None = None
    level: str | None = None
    kind: str | None = None
    description: str | None = None
    parent: Any = _UNSET  # a code, an id, or None for a root
    functions: list[str] | None = None
    status: str | None = None
    version: int | None = None  # on update: the version the client last read (optimistic lock)
    examples: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _choice(value: Any, choices: Any, what: str) -> str:
    if value not in choices.values:
        raise IntentError(f"{what} {value!r} is invalid; accepted: {', '.join(choices.values)}", details={"field": what})
    return str(value)


def _check_code(code: Any) -> str:
    if not isinstance(code, str) or not CODE_RE.match(code):
        raise IntentError("code must match ^[a-z0-9][a-z0-9._-]{0,63}$", details={"field": "code"})
    return code


def _check_examples(examples: Any) -> list[str]:
    if not isinstance(examples, list) or not all(isinstance(e, str) for e in examples):
        raise IntentError("examples must be a list of strings", details={"field": "examples"})
    cleaned = list(dict.fromkeys(e.strip() for e in examples if e.strip()))
    if len(cleaned) > MAX_EXAMPLES:
        raise IntentError(f"at most {MAX_EXAMPLES} examples per intent", details={"field": "examples"})
    if any(len(e) > MAX_EXAMPLE_CHARS for e in cleaned):
        raise IntentError(f"an example may have at most {MAX_EXAMPLE_CHARS} characters", details={"field": "examples"})
    return cleaned


def lookup_refs(*, tenant: Tenant, refs: list[str]) -> tuple[dict[str, ToolFunction], list[str]]:
    """`<tool>__<function>` refs to this tenant's ToolFunction rows (any state): (found by ref, the unknown refs).

    A tool name may itself contain "__", so every split point is tried. Another tenant's tools are never
    looked at, so a foreign ref is unknown exactly like a missing one.
    """
    splits: dict[tuple[str, str], str] = {}
    for ref in refs:
        for m in re.finditer("__", ref):
            tool, fn = ref[: m.start()], ref[m.end():]
            if tool and fn:
                splits.setdefault((tool, fn), ref)
    rows = ToolFunction.objects.filter(tool__tenant=tenant, tool__name__in={t for t, _ in splits}).select_related("tool")
    found: dict[str, ToolFunction] = {}
    for row in rows:
        named = splits.get((row.tool.name, row.name))
        if named is not None:
            found.setdefault(named, row)
    return found, [r for r in refs if r not in found]


def resolve_functions(*, tenant: Tenant, refs: Any) -> list[ToolFunction]:
    """`<tool>__<function>` refs to this tenant's ToolFunction rows; any unresolved ref fails the write."""
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise IntentError('functions must be a list of "<tool>__<function>" strings', details={"field": "functions"})
    if len(refs) > MAX_FUNCTIONS:
        raise IntentError(f"at most {MAX_FUNCTIONS} functions per intent", details={"field": "functions"})
    wanted = list(dict.fromkeys(refs))
    found, missing = lookup_refs(tenant=tenant, refs=wanted)
    if missing:
        raise IntentError(
            f"unknown function(s) {', '.join(missing)}: refs are <tool>__<function> of this tenant's tools",
            details={"field": "functions", "unresolved": missing},
        )
    return [found[r] for r in wanted]


def _resolve_parent(tenant: Tenant, parent: Any) -> IntentNode | None:
    if parent is None or parent == "":
        return None
    if isinstance(parent, int) and not isinstance(parent, bool):
        return selectors.intent_get(tenant=tenant, intent_id=parent)
    if isinstance(parent, str):
        node = selectors.intent_by_code(tenant=tenant, code=parent)
        if node is None:
            raise NotFound(f"parent intent {parent!r} not found")
        return node
    raise IntentError("parent must be an intent code, an id or null", details={"field": "parent"})


def _check_tree(node: IntentNode, parent: IntentNode | None) -> None:
    if parent is None:
        return
    if node.level == IntentLevel.DOMAIN:
        raise IntentError("a DOMAIN node has no parent", details={"field": "parent"})
    if LEVEL_RANK[IntentLevel(parent.level)] >= LEVEL_RANK[IntentLevel(node.level)]:
        raise IntentError(f"a {node.level} node cannot sit under a {parent.level} node", details={"field": "parent"})
    seen: set[Any] = set()
    up: IntentNode | None = parent
    while up is not None:
        if up.pk is not None and up.pk == node.pk or up.pk in seen:
            raise IntentError("parent would make a cycle", details={"field": "parent"})
        seen.add(up.pk)
        up = up.parent


def _set_examples(node: IntentNode, texts: list[str]) -> bool:
    """Replace the examples, keeping rows (and their vectors) whose text is unchanged; True if any changed."""
    existing = {e.text: e for e in node.examples.all()}
    changed = set(existing) != set(texts)
    IntentExample.objects.filter(node=node).exclude(text__in=texts).delete()
    for position, text in enumerate(texts):
        row = existing.get(text)
        if row is None:
            IntentExample.objects.create(node=node, text=text, position=position)
        elif row.position != position:
            row.position = position
            row.save(update_fields=["position"])
    return changed


def _enqueue_embedding(node: IntentNode) -> None:
    tenant_id, node_id = node.tenant_id, node.pk
    transaction.on_commit(lambda: tasks.embed_intent_examples.delay(tenant_id, node_id))


def _apply(tenant: Tenant, node: IntentNode, data: IntentInput, *, creating: bool) -> IntentNode:
    if data.code is not None or creating:
        node.code = _check_code(data.code)
    if data.name is not None or creating:
        if not isinstance(data.name, str) or not data.name.strip() or len(data.name) > 128:
            raise IntentError("name is required (at most 128 characters)", details={"field": "name"})
        node.name = data.name.strip()
    if data.level is not None:
        node.level = _choice(data.level, IntentLevel, "level")
    if data.kind is not None:
        node.kind = _choice(data.kind, IntentKind, "kind")
    if data.status is not None:
        node.status = _choice(data.status, IntentStatus, "status")
    if data.description is not None:
        node.description = data.description
    parent = node.parent if data.parent is _UNSET else _resolve_parent(tenant, data.parent)
    _check_tree(node, parent)
    node.parent = parent
    functions = None if data.functions is None else resolve_functions(tenant=tenant, refs=data.functions)
    examples = None if data.examples is None else _check_examples(data.examples)
    if IntentNode.objects.filter(tenant=tenant, code=node.code).exclude(pk=node.pk).exists():
        raise IntentError(f"intent code {node.code!r} is taken", details={"field": "code"})
    node.tenant = tenant
    node.save()
    if functions is not None:
        node.functions.set(functions)
    if examples is not None and _set_examples(node, examples):
        _enqueue_embedding(node)
    return node


@transaction.atomic
def intent_create(*, tenant: Tenant, actor: Any, data: IntentInput) -> IntentNode:
    """Create a node with its examples and functions; embeddings are computed after commit."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    node = IntentNode(tenant=tenant)
    node.version = data.version if isinstance(data.version, int) and data.version > 0 else 1
    _apply(tenant, node, data, creating=True)
    return selectors.intent_get(tenant=tenant, intent_id=node.pk)


@transaction.atomic
def intent_update(*, tenant: Tenant, actor: Any, intent_id: Any, changes: IntentInput) -> IntentNode:
    """Change fields (examples, when given, replace the list); every change bumps `version`."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    node = selectors.intent_get(tenant=tenant, intent_id=intent_id, for_update=True)
    if changes.version is not None and changes.version != node.version:
        raise IntentVersionConflict(
            f"intent {node.code!r} is at version {node.version}, not {changes.version}: reload and retry",
            details={"version": node.version},
        )
    node.version += 1
    _apply(tenant, node, changes, creating=False)
    return selectors.intent_get(tenant=tenant, intent_id=node.pk)


@transaction.atomic
def intent_delete(*, tenant: Tenant, actor: Any, intent_id: Any) -> None:
    """Delete a node without children (delete or move them first)."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    node = selectors.intent_get(tenant=tenant, intent_id=intent_id, for_update=True)
    children = list(IntentNode.objects.filter(tenant=tenant, parent=node).values_list("code", flat=True))
    if children:
        raise IntentHasChildren(f"intent {node.code!r} has children: {', '.join(sorted(children))}",
                                details={"children": sorted(children)})
    node.delete()


IMPORT_FIELDS = {"code", "name", "level", "kind", "description", "parent", "functions", "status", "version", "examples"}


@transaction.atomic
def intent_import(*, tenant: Tenant, actor: Any, items: Any) -> dict[str, int]:
    """Upsert nodes by code from an export (parents first); one bad node fails the whole import."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise IntentError("expected a list of intents", details={"field": "intents"})
    by_code: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(items):
        unknown = sorted(set(item) - IMPORT_FIELDS)
        if unknown:
            raise IntentError(f"intent #{i}: unknown field(s) {', '.join(unknown)}",
                              details={"index": i, "accepted": sorted(IMPORT_FIELDS)})
        code = _check_code(item.get("code"))
        if code in by_code:
            raise IntentError(f"intent code {code!r} appears twice", details={"index": i})
        by_code[code] = item
    ordered: list[str] = []
    placed: set[str] = set()

    def place(code: str, trail: tuple[str, ...]) -> None:
        if code in placed:
            return
        if code in trail:
            raise IntentError(f"parent cycle through {code!r}", details={"code": code})
        parent = by_code[code].get("parent")
        if isinstance(parent, str) and parent in by_code:
            place(parent, (*trail, code))
        placed.add(code)
        ordered.append(code)

    for code in by_code:
        place(code, ())
    existing = selectors.intents_by_codes(tenant=tenant, codes=list(by_code))
    counts = {"created": 0, "updated": 0}
    for code in ordered:
        item = by_code[code]
        data = IntentInput(
            code=code, name=item.get("name"), level=item.get("level") or IntentLevel.TOPIC,
            kind=item.get("kind") or IntentKind.MCP, description=item.get("description") or "",
            parent=item.get("parent"), functions=list(item.get("functions") or []),
            status=item.get("status") or IntentStatus.ENABLED, examples=list(item.get("examples") or []),
        )
        node = existing.get(code)
        try:
            if node is None:
                node = IntentNode(tenant=tenant, version=int(item.get("version") or 1))
                _apply(tenant, node, data, creating=True)
                counts["created"] += 1
            else:
                node.version += 1
                _apply(tenant, node, data, creating=False)
                counts["updated"] += 1
        except IntentError as exc:
            raise IntentError(f"intent {code!r}: {exc.message}", details={"code": code, **exc.details}) from None
    return counts
