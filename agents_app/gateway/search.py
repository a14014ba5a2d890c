"""Tool search for gateway clients of large agents: `search_functions` and `call` instead of every function.

With the agent's `tool_search` on (or `auto` and at least TOOLHUB_TOOL_SEARCH_AUTO_FROM functions), tools/list
answers two meta-tools and the agent's most used functions; `search_functions` answers the best matches for a
question (agents_app.runtime.function_search: the intent router's embedder and tree, BM25, usage), and a found
function is called by its name, directly or through `call`. Both go through the one call path (calls.py): the
same listing, roles, links, approvals and screen as a listed function; a name the agent does not offer this
user stays unknown.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
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


def visible(principal: Principal, functions: list[GatewayFunction], found: Sequence[str] = ()
            ) -> tuple[list[dict[str, Any]], list[GatewayFunction]]:
    """What tools/list shows: (meta-tools, functions). Search off: no meta-tools and every function. Search on:
    the agent's most used functions, then what search found in this session (`found`, oldest first) that the
    agent still offers this user."""
    made = listing(principal)
    if not enabled(principal, made):
        return [], functions
    used = most_used(principal)
    pinned = sorted((f for f in functions if used.get(f.name)), key=lambda f: (-used[f.name], f.name))
    shown = pinned[: int(settings.TOOLHUB_TOOL_SEARCH_PINNED)]
    names = {f.name for f in shown}
    by_name = {f.name: f for f in functions}
    for name in found:
        if name in by_name and name not in names:
            names.add(name)
            shown.append(by_name[name])
    return [SEARCH_TOOL, CALL_TOOL], shown


# What search found in a 2025 session, kept beside the session's record (agents_app.gateway.sessions) in the
# Django cache, so whichever process answers the session's next tools/list lists them.
FOUND_KEY = "toolhub:mcp-found:{}"
MAX_FOUND = 64  # the most recently found names a session lists; older ones stay callable by name and `call`


def found_in_session(session_id: str | None) -> list[str]:
    if not session_id:
        return []
    kept = cache.get(FOUND_KEY.format(session_id[:64]))
    return [str(n) for n in kept] if isinstance(kept, list) else []


def remember_found(session_id: str | None, names: Sequence[str]) -> bool:
    """Add `names` to what the session lists; True when that changed its tools/list (list_changed is due)."""
    if not session_id:
        return False
    kept = found_in_session(session_id)
    fresh = [n for n in dict.fromkeys(names) if n not in kept]
    if not fresh:
        return False
    cache.set(FOUND_KEY.format(session_id[:64]), (kept + fresh)[-MAX_FOUND:],
              timeout=int(settings.TOOLHUB_MCP_SESSION_IDLE_S) + 60)
    return True


def found_names(answered: dict[str, Any]) -> list[str]:
    """The function names a search_functions result answered."""
    if answered.get("isError"):
        return []
    return [str(f["name"]) for f in (answered.get("structuredContent") or {}).get("functions", [])]


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


# Indexes by the hash of what they were built from (every function's name, title and description): a drift or an
# override that changes a text, or a link edit that changes the set, is another key; the same toolset seen by many
# users, or kept across unrelated writes of the tenant (a breaker's counter, a quota), is one index built once.
_indexes: OrderedDict[str, FunctionIndex] = OrderedDict()
_indexes_lock = threading.Lock()
_MAX_INDEXES = 64


def _content_key(docs: list[FunctionDoc]) -> str:
    digest = hashlib.sha256()
    for doc in docs:
        digest.update(f"{doc.name}\x00{doc.title}\x00{doc.description}\x01".encode())
    return digest.hexdigest()


def index_of(made: Listing) -> FunctionIndex:
    """The search index of this listing's functions: their vectors embedded once per text (_vectors), the index
    built once per distinct content (_indexes); a search embeds only its question."""
    docs = [FunctionDoc(f.name, f.title, f.description) for f in made.functions]
    key = _content_key(docs)
    with _indexes_lock:
        index = _indexes.get(key)
        if index is not None:
            _indexes.move_to_end(key)
            return index
    index = build_index(docs, default_embedder().embed_second, _Cache())
    with _indexes_lock:
        _indexes[key] = index
        while len(_indexes) > _MAX_INDEXES:
            _indexes.popitem(last=False)
    return index


def _router(principal: Principal) -> Any:
    """The tenant's intent router when it has intents (its labelled examples point questions at functions)."""
    from agents_app.intents.routing import tree_index

    tree = tree_index(tenant=principal.tenant)
    return tree.index if len(tree.index) else None


def run_search(principal: Principal, query: str, limit: int = 8) -> list[dict[str, Any]]:
    made = listing(principal)
    refs = {f"{f.function.tool_name}__{f.function.function}": f.name for f in made.functions}
    hits = search(index_of(made), query, embedder=default_embedder(), router=_router(principal),
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
