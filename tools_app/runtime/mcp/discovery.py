"""Discovery and result shaping: tools/list (all pages) to FunctionInfo, CallToolResult to ToolResult."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession

from tools_app.runtime.content import content_dicts, joined_text
from tools_app.runtime.errors import ProtocolError
from tools_app.runtime.result import BUSINESS_ERROR, RESULT_META, UPSTREAM_ERROR, ToolResult
from tools_app.runtime.schemas import schema_hash

MAX_LIST_PAGES = 100
TASKS_REQUIRED = ("the server runs this function only as an MCP task (execution.taskSupport: required), "
                  "which Toolhub does not support; it is left out of toolsets")


@dataclass
class FunctionInfo:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None
    schema_hash: str
    # Why Toolhub cannot call it (blank when it can), e.g. it requires MCP tasks.
    unsupported_reason: str = ""
    # Shown as sent, outside the schema hash: the display title, `_meta` (an MCP Apps UI link) and icons.
    title: str = ""
    meta: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None


@dataclass
class Discovery:
    server_name: str
    server_version: str
    protocol_version: str
    functions: list[FunctionInfo] = field(default_factory=list)
    latency_ms: int = 0
    # What else the server tells a model, read by the screen (a probe's only; a pooled rediscovery leaves them
    # empty): the `instructions` of its initialize/discover result, its prompts and resources as listed
    # ({name, title, description, arguments: [{name, description}]} / {name, title, description, uri}).
    instructions: str = ""
    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)


def function_info(tool: types.Tool) -> FunctionInfo:
    annotations = (
        tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True) if tool.annotations else None
    )
    description = tool.description or ""
    input_schema = dict(tool.input_schema or {"type": "object"})
    output_schema = dict(tool.output_schema) if tool.output_schema else None
    task_support = tool.execution.task_support if tool.execution is not None else None
    icons = [icon.model_dump(mode="json", by_alias=True, exclude_none=True) for icon in tool.icons or []]
    return FunctionInfo(
        unsupported_reason=TASKS_REQUIRED if task_support == "required" else "",
        title=tool.title or "",
        meta=dict(tool.meta) if tool.meta else None,
        icons=icons or None,
        name=tool.name,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=annotations or None,
        schema_hash=schema_hash(
            name=tool.name,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            annotations=annotations or None,
        ),
    )


async def list_all_tools(session: ClientSession) -> tuple[list[FunctionInfo], int]:
    """Every tool the server offers, following nextCursor (bounded, loop-safe), and the listing's cache hint: the
    shortest `ttlMs` of its pages (0 when a page has none: the handshake era, or a server that gives no hint)."""
    functions: list[FunctionInfo] = []
    seen_cursors: set[str] = set()
    cursor: str | None = None
    ttl_ms: int | None = None
    for _page in range(MAX_LIST_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        functions.extend(function_info(tool) for tool in result.tools)
        page_ttl = int(getattr(result, "ttl_ms", None) or 0)
        ttl_ms = page_ttl if ttl_ms is None else min(ttl_ms, page_ttl)
        cursor = result.next_cursor
        if not cursor:
            return functions, ttl_ms or 0
        if cursor in seen_cursors:
            raise ProtocolError("server repeated a tools/list cursor")
        seen_cursors.add(cursor)
    raise ProtocolError(f"server's tools/list has more than {MAX_LIST_PAGES} pages")


def build_discovery(server: types.Implementation | None, protocol_version: str, functions: list[FunctionInfo],
                    latency_ms: int, instructions: str = "") -> Discovery:
    """`server` is None when a 2026-07-28 server did not name itself (its discover `_meta` stamp is optional)."""
    return Discovery(
        server_name=server.name if server else "",
        server_version=(server.version or "") if server else "",
        protocol_version=protocol_version,
        functions=functions,
        latency_ms=latency_ms,
        instructions=instructions,
    )


# Pages of prompts/list and resources/list a probe reads for the screen (each page is typically the whole list).
MAX_TEXT_PAGES = 10


def instructions_of(session: ClientSession) -> str:
    """The `instructions` of the server's discover or initialize result ('' when it gave none)."""
    result = session.discover_result or session.initialize_result
    return str(getattr(result, "instructions", None) or "")


def _prompt(prompt: types.Prompt) -> dict[str, Any]:
    return {"name": prompt.name, "title": prompt.title or "", "description": prompt.description or "",
            "arguments": [{"name": a.name, "description": a.description or ""} for a in prompt.arguments or []]}


def _resource(resource: types.Resource) -> dict[str, Any]:
    return {"name": resource.name, "title": resource.title or "", "description": resource.description or "",
            "uri": str(resource.uri)}


async def list_server_texts(session: ClientSession) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The prompts and resources a server advertises (the capability), as the screen reads them. A listing the
    server fails is an empty one: the screen reads what is offered, and it offers nothing it cannot list."""
    caps = session.server_capabilities
    prompts: list[dict[str, Any]] = []
    resources: list[dict[str, Any]] = []
    if caps is not None and caps.prompts is not None:
        prompts = [_prompt(p) for p in await _every_page(session.list_prompts, "prompts")]
    if caps is not None and caps.resources is not None:
        resources = [_resource(r) for r in await _every_page(session.list_resources, "resources")]
    return prompts, resources


async def _every_page(list_page: Callable[..., Awaitable[Any]], items: str) -> list[Any]:
    """The items of every page of one listing (at most MAX_TEXT_PAGES); a page the server fails ends it."""
    out: list[Any] = []
    cursor: str | None = None
    for _page in range(MAX_TEXT_PAGES):
        try:
            listed = await list_page(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        except Exception:  # noqa: BLE001 - see list_server_texts
            break
        out.extend(getattr(listed, items))
        cursor = listed.next_cursor
        if not cursor:
            break
    return out


def to_tool_result(result: types.CallToolResult) -> ToolResult:
    """The content list kept whole, its readable text joined, structuredContent as `data`, `_meta` kept; isError a
    business error marked as the server's own."""
    content = content_dicts(list(result.content or []))
    text = joined_text(content)
    extra: dict[str, Any] = {RESULT_META: dict(result.meta)} if result.meta else {}
    if result.is_error:
        out = ToolResult.fail(BUSINESS_ERROR, text or "the tool reported an error", **extra, **{UPSTREAM_ERROR: True})
        out.text = text
        out.data = result.structured_content
        out.content = content
        return out
    return ToolResult.ok(data=result.structured_content, text=text, content=content, **extra)
