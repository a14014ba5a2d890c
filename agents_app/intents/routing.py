"""Routing questions through a tenant's intent tree, in-process, with one cached router per tree version.

The router (agents_app.runtime.intents) is Django-free; this module feeds it plain rows and decides which
nodes a caller may reach: only enabled nodes (under enabled ancestors) whose functions the caller may use.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from agents_app.intents import selectors, tasks
from agents_app.models import Agent, AgentRouting
from agents_app.runtime.intents.policy import OFFERS_FUNCTIONS, OFFERS_KNOWLEDGE, Routing, decide
from agents_app.runtime.toolset import Toolset
from tenants_app.models import Tenant

# The router itself (numpy, the embedder) is imported where an index is built or matched: this module connects the
# intent signals from the app's ready(), and so every Django process's start (issue 35) would pay for numpy.
if TYPE_CHECKING:
    from agents_app.runtime.intents import IntentIndex, Match

FnKey = tuple[int, str]  # (tool id, function name)


@dataclass(frozen=True)
class TreeIndex:
    """A tenant's router plus what it needs to filter matches: each node's functions as (key, ref)."""

    signature: tuple[Any, ...]
    index: IntentIndex
    functions: dict[str, tuple[tuple[FnKey, str], ...]]
    kinds: dict[str, str]


_cache: dict[int, TreeIndex] = {}
_checked: dict[int, tuple[int, float]] = {}  # tenant id -> (local generation, monotonic time of the last check)
_lock = threading.Lock()
_generation = 0  # bumped by every intent write in this process (signals, and again on commit)


def clear_cache() -> None:
    with _lock:
        _cache.clear()
        _checked.clear()


def _bump() -> None:
    global _generation
    with _lock:
        _generation += 1


def tree_changed(**_: Any) -> None:
    """Signal receiver: an intent node, example or function link changed in this process.

    Bumped now and again after commit, so a route that re-read the old tree between the two rebuilds.
    """
    _bump()
    transaction.on_commit(_bump)


def connect() -> None:
    from agents_app.models import IntentExample, IntentNode

    for model in (IntentNode, IntentExample):
        post_save.connect(tree_changed, sender=model, dispatch_uid=f"intents-save-{model.__name__}")
        post_delete.connect(tree_changed, sender=model, dispatch_uid=f"intents-delete-{model.__name__}")
    m2m_changed.connect(tree_changed, sender=IntentNode.functions.through, dispatch_uid="intents-functions")


def _now() -> float:
    return time.monotonic()


def _build(tenant: Tenant, signature: tuple[Any, ...]) -> TreeIndex:
    # numpy on first use (see the imports)
    from agents_app.runtime.intents import IntentIndex, IntentSpec, RouterConfig, default_embedder
    from agents_app.runtime.intents.embedder import from_bytes

    nodes, examples, function_rows = selectors.routing_rows(tenant=tenant)
    embedder = default_embedder()
    by_id = {n["id"]: n for n in nodes}

    def chain(node: dict[str, Any]) -> list[dict[str, Any]]:
        out, seen = [node], {node["id"]}
        while out[-1]["parent_id"] in by_id and out[-1]["parent_id"] not in seen:
            out.append(by_id[out[-1]["parent_id"]])
            seen.add(out[-1]["id"])
        return out[::-1]

    texts: dict[int, list[str]] = {}
    vectors: dict[int, list[Any]] = {}
    for node_id, text, blob, model in examples:
        texts.setdefault(node_id, []).append(text)
        vectors.setdefault(node_id, []).append(from_bytes(blob) if model == embedder.model else None)
    fns: dict[int, list[tuple[FnKey, str]]] = {}
    for node_id, tool_id, tool_name, fn_name in function_rows:
        fns.setdefault(node_id, []).append(((tool_id, fn_name), f"{tool_name}__{fn_name}"))
    specs: list[IntentSpec] = []
    for node in nodes:
        path = chain(node)
        if any(n["status"] != "ENABLED" for n in path):
            continue
        if not texts.get(node["id"]) and not fns.get(node["id"]):
            continue  # nothing to match on and nothing to offer: a pure grouping node
        specs.append(IntentSpec(
            code=node["code"], name=node["name"], kind=node["kind"], path=tuple(n["code"] for n in path),
            functions=tuple(ref for _, ref in fns.get(node["id"], [])), description=node["description"],
            examples=tuple(texts.get(node["id"], [])), vectors=vectors.get(node["id"], []),
        ))
    ids = {n["code"]: n["id"] for n in nodes}
    config = RouterConfig(max_embed_on_build=int(settings.TOOLHUB_INTENT_EMBED_ON_BUILD))
    index = IntentIndex(specs, embedder, config)
    if index.missing_vectors or index.embedded_on_build:
        # Vectors of another model (an upgrade of the embedder) or never stored: have the worker store them. Its
        # write touches the nodes, so the next route after it rebuilds with every vector; until then those
        # examples were embedded just now (a few) or count on the lexical channel alone.
        transaction.on_commit(lambda: tasks.embed_intent_examples.delay(tenant.pk))
    return TreeIndex(signature=signature, index=index,
                     functions={s.code: tuple(fns.get(ids[s.code], [])) for s in specs},
                     kinds={s.code: s.kind for s in specs})


def tree_index(*, tenant: Tenant) -> TreeIndex:
    """The tenant's router, rebuilt only when its tree signature changed.

    A warm route reads nothing from the database: the signature is read again only after a write in this
    process, or every TOOLHUB_INTENT_RECHECK_S seconds for writes made by other processes.
    """
    recheck = float(getattr(settings, "TOOLHUB_INTENT_RECHECK_S", 2.0))
    with _lock:
        cached = _cache.get(tenant.pk)
        generation = _generation
        last = _checked.get(tenant.pk)
    now = _now()
    if cached is not None and last is not None and last[0] == generation and now - last[1] < recheck:
        return cached
    signature = selectors.tree_signature(tenant=tenant)
    if cached is None or cached.signature != signature:
        cached = _build(tenant, signature)
    with _lock:
        _cache[tenant.pk] = cached
        _checked[tenant.pk] = (generation, now)
    return cached


def _qualified(toolset: Toolset) -> dict[FnKey, str]:
    return {(f.tool_id, f.function): f.qualified_name for f in toolset}


def _reachable(kind: str, functions: tuple[str, ...], knowledge: str | None, for_agent: bool) -> bool:
    """A node is offered when it still has something to give this caller: tools, knowledge, or (SYSTEM) nothing."""
    kb_ok = knowledge is not None if for_agent else True  # without an agent, the caller picks the knowledge tool
    if kind == "SYSTEM":
        return True
    if kind == "MCP":
        return bool(functions)
    if kind == "KB":
        return kb_ok
    return bool(functions) or kb_ok  # KB_AND_MCP


def _match(tree: TreeIndex, question: str, *, toolset: Toolset, knowledge: str | None, top_k: int,
           for_agent: bool) -> list[Match]:
    """Matches restricted to what `toolset` offers; functions the caller may not use are dropped.

    For an agent run, functions are named as the toolset names them (what the model sees); otherwise as
    `<tool>__<function>` refs.
    """
    from agents_app.runtime.intents import Match  # numpy on first use (see the imports)

    names = _qualified(toolset)
    refs = {(f.tool_id, f.function): f"{f.tool_name}__{f.function}" for f in toolset}
    allowed: dict[str, tuple[str, ...]] = {
        # Refs are rebuilt from the live toolset, so a renamed tool shows its new name without a tree rebuild.
        code: tuple(dict.fromkeys(names[key] if for_agent else refs[key] for key, _ in fns if key in names))
        for code, fns in tree.functions.items()
    }
    ok = [c for c, kind in tree.kinds.items() if _reachable(kind, allowed[c], knowledge, for_agent)]
    out = []
    for m in tree.index.route(question, top_k=top_k, eligible=ok):
        fns = allowed[m.code] if m.kind in OFFERS_FUNCTIONS else ()
        if knowledge and m.kind in OFFERS_KNOWLEDGE:
            fns = (*fns, knowledge)
        out.append(Match(code=m.code, score=m.score, path=m.path, kind=m.kind, functions=tuple(dict.fromkeys(fns)),
                         semantic=m.semantic, lexical=m.lexical, example=m.example))
    return out


def _knowledge_name(agent: Agent, toolset: Toolset) -> str | None:
    """The agent's knowledge function as its toolset name, if the run may offer it."""
    ref = (agent.knowledge_function or "").strip()
    if not ref:
        return None
    for f in toolset:
        if f"{f.tool_name}__{f.function}" == ref or f.qualified_name == ref:
            return f.qualified_name
    return None


def route_question(*, tenant: Tenant, question: str, toolset: Toolset, agent: Agent | None = None,
                   top_k: int = 3) -> tuple[list[dict[str, Any]], int]:
    """The route API's answer: the best nodes for the question that `toolset` (the agent's for this caller, or
    without an agent every function the caller may use: agents_app.toolsets) lets them reach, and the cost."""
    start = time.perf_counter()
    tree = tree_index(tenant=tenant)
    knowledge = _knowledge_name(agent, toolset) if agent is not None else None
    matches = _match(tree, question, toolset=toolset, knowledge=knowledge, top_k=top_k, for_agent=agent is not None)
    body = [{"intent": m.code, "score": round(min(1.0, max(0.0, m.score)), 4), "path": list(m.path), "kind": m.kind,
             "functions": list(m.functions)} for m in matches]
    return body, int(round((time.perf_counter() - start) * 1000))


def threshold_of(agent: Agent) -> float:
    if agent.routing_threshold is not None:
        return float(agent.routing_threshold)
    return float(getattr(settings, "TOOLHUB_INTENT_THRESHOLD", 0.35))


def route_turn(*, tenant: Tenant, actor: Any, agent: Agent, toolset: Toolset, question: str,
               limit: int) -> tuple[Toolset, dict[str, Any] | None]:
    """For an agent with routing "intent": the narrowed toolset of this turn and the `intent.routed` event data.

    `limit` is the model's tool limit (agents_app.toolsets.model_tool_limit); a fallback offers at most that
    many functions, the best matches' first. The narrowed toolset keeps routing's order, so a later cap at the
    model's limit cuts from the least relevant end.
    """
    if agent.routing != AgentRouting.INTENT:
        return toolset, None
    start = time.perf_counter()
    tree = tree_index(tenant=tenant)
    knowledge = _knowledge_name(agent, toolset)
    matches = _match(tree, question, toolset=toolset, knowledge=knowledge, top_k=3, for_agent=True)
    names = {f"{f.tool_name}__{f.function}": f.qualified_name for f in toolset}
    always_on = [names.get(r, r) for r in (agent.always_on or []) if isinstance(r, str)]
    routing: Routing = decide(matches, available=toolset.names(), threshold=threshold_of(agent),
                              limit=limit,
                              margin=float(getattr(settings, "TOOLHUB_INTENT_MARGIN", 0.1)),
                              knowledge=knowledge, always_on=always_on)
    narrowed = Toolset(tuple(f for f in (toolset.get(n) for n in routing.offered) if f is not None),
                       left_out=toolset.left_out)
    event = routing.event(full_count=len(toolset))
    event["cost_ms"] = int(round((time.perf_counter() - start) * 1000))
    return narrowed, event
