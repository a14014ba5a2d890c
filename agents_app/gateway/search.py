"""Tool search for gateway clients of large agents: `search_functions` and `call` instead of every function.

With the agent's `tool_search` on (or `auto` and at least TOOLHUB_TOOL_SEARCH_AUTO_FROM functions), tools/list
answers two meta-tools and the agent's most used functions; `search_functions` answers the best matches for a
question (agents_app.runtime.function_search: the intent router's embedder and tree, BM25, usage), and a found
function is called by its name, directly or through `call`. Both go through the one call path (calls.py): the
same listing, roles, links, approvals and screen as a listed function; a name the agent does not offer this
user stays unknown.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from agents_app.gateway.listing import GatewayFunction, Listing, listing
from agents_app.gateway.principal import Principal
from agents_app.runtime.function_search import FunctionDoc, FunctionIndex, build_index, search
from agents_app.runtime.intents import default_embedder
from core import hotcache
from tools_app.models import ToolCall

SEARCH = "search_functions"
CALL = "call"
META_NAMES = frozenset({SEARCH, CALL})
MAX_RESULTS = 20
USAGE_DAYS = 30

SEARCH_TOOL: dict[str, Any] = {
    "name": SEARCH,
    "title": "Search this agent's functions",
    "description": ("Find the functions of this agent that fit a task: answers their names, titles, descriptions "
                    "and input schemas, best first. Call a found function by its name (or through `call`)."),
    "inputSchema": {"type": "object", "properties": {
        "query": {"type": "string", "description": "what you want to do, in any language"},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": 8},
    }, "required": ["query"], "additionalProperties": False},
    "annotations": {"title": "Search this agent's functions", "readOnlyHint": True, "destructiveHint": False},
}
CALL_TOOL: dict[str, Any] = {
    "name": CALL,
    "title": "Call a function found by search",
    "description": "Call one of this agent's functions by the name `search_functions` answered, with its arguments.",
    "inputSchema": {"type": "object", "properties": {
        "name": {"type": "string", "description": "the function's name as search_functions answered it"},
        "arguments": {"type": "object", "description": "the function's arguments (its inputSchema)"},
    }, "required": ["name"], "additionalProperties": False},
    "annotations": {"title": "Call a function found by search", "readOnlyHint": False, "destructiveHint": True},
}


def enabled(principal: Principal, made: Listing) -> bool:
    mode = getattr(principal.agent, "tool_search", "auto") or "auto"
    if mode == "off":
        return False
    return mode == "on" or len(made.functions) >= int(settings.TOOLHUB_TOOL_SEARCH_AUTO_FROM)


def visible(principal: Principal, functions: list[GatewayFunction]) -> tuple[list[dict[str, Any]],
                                                                             list[GatewayFunction]]:
    """What tools/list shows: (meta-tools, functions). Search off: no meta-tools and every function."""
    made = listing(principal)
    if not enabled(principal, made):
        return [], functions
    used = most_used(principal)
    pinned = sorted((f for f in functions if used.get(f.name)), key=lambda f: (-used[f.name], f.name))
    return [SEARCH_TOOL, CALL_TOOL], pinned[: int(settings.TOOLHUB_TOOL_SEARCH_PINNED)]


def most_used(principal: Principal) -> dict[str, int]:
    """Calls of each of the agent's functions in the last USAGE_DAYS days (the audit), by qualified name."""
    def load() -> dict[str, int]:
        since = timezone.now() - timedelta(days=USAGE_DAYS)
        rows = (ToolCall.objects.filter(tenant=principal.tenant, agent=principal.agent, created_at__gte=since)
                .values("tool_name", "function").annotate(n=Count("id")).order_by("-n")[:200])
        return {f"{r['tool_name']}__{r['function']}": int(r["n"]) for r in rows}

    used: dict[str, int] = hotcache.remembered("tool-search-usage", (principal.tenant.pk, principal.agent.pk),
                                               (hotcache.tenant_scope(principal.tenant.pk),), load)
    return used


# Function vectors by text, shared by every agent of this process: a listing change re-embeds only what changed.
_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
_vectors_lock = threading.Lock()
_MAX_VECTORS = 50_000


class _Cache(dict[str, np.ndarray]):
    """build_index's text -> vector cache, over the process-wide LRU."""

    def __contains__(self, text: object) -> bool:
        with _vectors_lock:
            return text in _vectors

    def __getitem__(self, text: str) -> np.ndarray:
        with _vectors_lock:
            _vectors.move_to_end(text)
            return _vectors[text]

    def __setitem__(self, text: str, vector: np.ndarray) -> None:
        with _vectors_lock:
            _vectors[text] = vector
            while len(_vectors) > _MAX_VECTORS:
                _vectors.popitem(last=False)


def index_of(principal: Principal, made: Listing) -> FunctionIndex:
    """The search index of this listing (kept while the listing stands)."""
    key = (principal.tenant.pk, principal.agent.pk, made.fingerprint)

    def build() -> FunctionIndex:
        docs = [FunctionDoc(f.name, f.title, f.description) for f in made.functions]
        return build_index(docs, default_embedder().embed_second, _Cache())

    index: FunctionIndex = hotcache.remembered("tool-search-index", key, (hotcache.tenant_scope(principal.tenant.pk),),
                                               build)
    return index


def _router(principal: Principal) -> Any:
    """The tenant's intent router when it has intents (its labelled examples point questions at functions)."""
    from agents_app.intents.routing import tree_index

    tree = tree_index(tenant=principal.tenant)
    return tree.index if len(tree.index) else None


def run_search(principal: Principal, query: str, limit: int = 8) -> list[dict[str, Any]]:
    made = listing(principal)
    refs = {f"{f.function.tool_name}__{f.function.function}": f.name for f in made.functions}
    hits = search(index_of(principal, made), query, embedder=default_embedder(), router=_router(principal),
                  refs=refs, usage=most_used(principal), top_k=limit)
    by_name = made.by_name
    return [{"name": h.name, "title": h.title, "description": h.description,
             "inputSchema": by_name[h.name].input_schema, "score": h.score} for h in hits if h.name in by_name]


def _error(code: str, message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"{code}: {message}"}], "isError": True,
            "_meta": {"toolhub/refusal": {"error_code": code}}}


def intercept(principal: Principal, name: str, arguments: dict[str, Any]
              ) -> tuple[dict[str, Any] | None, str, dict[str, Any]]:
    """A tools/call of a meta-tool: (its result, -, -) for `search_functions` or a bad `call`; (None, the function's
    name, its arguments) for a good `call`, which then runs like a call by that name. Search off for this agent:
    (None, name, arguments) unchanged, so the name is as unknown as any other."""
    if name not in META_NAMES or not enabled(principal, listing(principal)):
        return None, name, arguments
    if name == SEARCH:
        query, limit = arguments.get("query"), arguments.get("limit", 8)
        unknown = sorted(set(arguments) - {"query", "limit"})
        if not isinstance(query, str) or not query.strip() or unknown:
            return _error("INVALID_PARAMS", "search_functions takes `query` (a non-empty string) and an optional "
                          f"`limit` (1..{MAX_RESULTS}){'; unknown: ' + ', '.join(unknown) if unknown else ''}"), name, {}
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESULTS:
            return _error("INVALID_PARAMS", f"limit must be an integer from 1 to {MAX_RESULTS}"), name, {}
        found = run_search(principal, query.strip(), limit)
        return {"content": [{"type": "text", "text": json.dumps({"functions": found}, ensure_ascii=False)}],
                "structuredContent": {"functions": found}, "isError": False}, name, {}
    target, inner = arguments.get("name"), arguments.get("arguments", {})
    unknown = sorted(set(arguments) - {"name", "arguments"})
    if not isinstance(target, str) or not target or not isinstance(inner, dict) or unknown:
        return _error("INVALID_PARAMS", "call takes `name` (a function name search_functions answered) and "
                      "`arguments` (an object)"), name, {}
    if target in META_NAMES:
        return _error("INVALID_PARAMS", f"call runs the agent's functions, not {target!r}"), name, {}
    return None, target, inner
