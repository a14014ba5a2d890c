"""Parse catalog documents (simple list, mcpServers client config, official registry page) into entries."""

from __future__ import annotations

from typing import Any, Literal

from market_app.catalog.common import (
    Collector,
    name_of,
    split_command,
    status_of,
    str_dict,
    str_list,
    text,
    transport_of,
    vars_from_values,
)
from market_app.catalog.registry import Prefer, parse_registry_server, registry_next_cursor
from market_app.catalog.types import FORMATS, CatalogError, EntryData, EntryError, Kind, ParseResult

EXPECTED = (
    'expected a JSON array, {"data": [...]}, {"mcpServers": {...}} '
    'or an MCP registry page {"servers": [...]}'
)

ToolSpec = tuple[str, Literal["LOCAL", "REMOTE"], dict[str, Any]]


def describe(doc: Any) -> str:
    """A short, value-free description of a JSON document for error messages."""
    if isinstance(doc, dict):
        keys = ", ".join(repr(str(k)) for k in list(doc)[:6])
        more = ", ..." if len(doc) > 6 else ""
        return f"a JSON object with keys {keys}{more}" if doc else "an empty JSON object"
    if isinstance(doc, list):
        return "a JSON array"
    if doc is None:
        return "JSON null"
    return f"a JSON {type(doc).__name__}"


def detect(doc: Any) -> str:
    """The format of a parsed JSON document, or CatalogError when it is none of the known ones."""
    if isinstance(doc, list):
        return "list"
    if isinstance(doc, dict):
        if isinstance(doc.get("mcpServers"), dict):
            return "mcp_servers"
        servers = doc.get("servers")
        if isinstance(servers, list):
            return "official_registry"
        if isinstance(servers, dict):  # VS Code's mcp.json spells the client config this way
            return "mcp_servers"
        if isinstance(doc.get("data"), list):
            return "list"
    raise CatalogError(f"not a catalog: {EXPECTED}; got {describe(doc)}")


def parse_document(doc: Any, fmt: str = "auto", *, prefer: Prefer = "remote") -> ParseResult:
    """Parse one JSON document (or one registry page) in format `fmt` ("auto" detects it).

    Items that cannot be mapped become EntryErrors naming the item; later duplicates of a name too.
    """
    if fmt not in FORMATS:
        raise CatalogError(f"unknown catalog format {fmt!r}; accepted: {', '.join(FORMATS)}",
                           code="unknown_format")
    actual = detect(doc) if fmt == "auto" else fmt
    if actual == "list":
        result = parse_list(doc)
    elif actual == "mcp_servers":
        result = parse_mcp_servers(doc)
    else:
        result = parse_official_registry(doc, prefer=prefer)
    result.format = actual
    return result


# --- simple list -------------------------------------------------------------------------------------

def parse_list(doc: Any) -> ParseResult:
    """A top-level array or `{"data": [...]}` of `{name, description, version, url|command|package}`."""
    items = doc.get("data") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise CatalogError(f'format "list" expects a JSON array or {{"data": [...]}}; got {describe(doc)}')
    out = Collector()
    for index, item in enumerate(items):
        name = name_of(item)
        if not isinstance(item, dict):
            out.error(None, f"item #{index} is not a JSON object", index)
        elif name is None:
            out.error(None, f"item #{index} has no name", index)
        else:
            try:
                out.add(_list_entry(name, item), index)
            except ValueError as exc:
                out.error(name, str(exc), index)
    return ParseResult(out.entries, out.errors)


def _list_entry(name: str, item: dict[str, Any]) -> EntryData:
    common = {
        "name": name,
        "title": text(item.get("title")) or name,
        "description": text(item.get("description")),
        "version": text(item.get("version")),
        "status": status_of(item.get("status")),
    }
    url = text(item.get("baseUrl")) or text(item.get("url")) or text(item.get("serverUrl"))
    command = text(item.get("command"))
    package = text(item.get("package")) or text(item.get("npmPackage"))
    if url:
        return _remote(common, url, item.get("transport") or item.get("type"), item.get("headers"))
    if command:
        return _local(common, command, item.get("args"), item.get("env"))
    if package:
        return _local(common, "npx", ["-y", package], item.get("env"))
    raise ValueError("no baseUrl/url, command or package: nothing to install")


def _remote(common: dict[str, Any], url: str, transport_raw: Any, headers_raw: Any) -> EntryData:
    transport = transport_of(transport_raw)
    if transport is None:
        raise ValueError(f"unsupported transport {text(transport_raw)!r} for a URL; accepted: http, sse")
    kept, declared = vars_from_values(str_dict(headers_raw, "headers"))
    install = {"url": url, "transport": transport, "headers": kept}
    return EntryData.build(kind="REMOTE", install=install, required_headers=declared, **common)


def _local(common: dict[str, Any], command: str, args_raw: Any, env_raw: Any) -> EntryData:
    cmd, args = split_command(command, str_list(args_raw, "args"))
    kept, declared = vars_from_values(str_dict(env_raw, "env"))
    install = {"command": cmd, "args": args, "env": kept}
    return EntryData.build(kind="LOCAL", install=install, required_env=declared, **common)


# --- mcpServers client configuration -----------------------------------------------------------------

def _servers_map(doc: Any) -> dict[str, Any]:
    servers = doc.get("mcpServers", doc.get("servers")) if isinstance(doc, dict) else None
    if not isinstance(servers, dict):
        raise CatalogError(f'format "mcp_servers" expects {{"mcpServers": {{...}}}}; got {describe(doc)}')
    return servers


def _server_config(spec: Any) -> tuple[Kind, dict[str, Any]]:
    """The Tool config of one mcpServers item, values kept verbatim; ValueError names what is wrong."""
    if not isinstance(spec, dict):
        raise ValueError("server definition is not a JSON object")
    kind_raw = text(spec.get("type") or spec.get("transport")).lower()
    url = text(spec.get("url")) or text(spec.get("serverUrl"))
    command = text(spec.get("command"))
    if kind_raw == "stdio" or (command and not url):
        if not command:
            raise ValueError('type "stdio" without a command')
        cmd, args = split_command(command, str_list(spec.get("args"), "args"))
        config: dict[str, Any] = {"command": cmd, "args": args, "env": str_dict(spec.get("env"), "env")}
        if text(spec.get("cwd")):
            config["cwd"] = text(spec.get("cwd"))
        return "LOCAL", config
    if url:
        transport = transport_of(kind_raw)
        if transport is None:
            raise ValueError(f"unsupported type {kind_raw!r}; accepted: stdio, http, streamable-http, sse")
        return "REMOTE", {"url": url, "transport": transport,
                          "headers": str_dict(spec.get("headers"), "headers")}
    raise ValueError("neither a command nor a url/serverUrl")


def parse_mcp_servers(doc: Any) -> ParseResult:
    """`{"mcpServers": {name: {command, args, env} | {url|serverUrl, headers, type}}}` as catalog entries."""
    out = Collector()
    for index, (key, spec) in enumerate(_servers_map(doc).items()):
        name = str(key).strip()
        if not name:
            out.error(None, f"server #{index} has an empty name", index)
            continue
        try:
            kind, config = _server_config(spec)
        except ValueError as exc:
            out.error(name, str(exc), index)
            continue
        common = {
            "name": name,
            "title": text(spec.get("title")) or name,
            "description": text(spec.get("description")),
            "version": text(spec.get("version")),
            "status": status_of(spec.get("status")),
        }
        try:
            if kind == "LOCAL":
                entry = _local(common, config["command"], config["args"], config["env"])
            else:
                entry = _remote(common, config["url"], config["transport"], config["headers"])
        except ValueError as exc:
            out.error(name, str(exc), index)
            continue
        out.add(entry, index)
    return ParseResult(out.entries, out.errors)


def mcp_servers_to_tools(doc: Any) -> tuple[list[ToolSpec], list[EntryError]]:
    """A client config as Tool specs `(name, kind, config)`, one per server, values kept (they are the
    user's own, stored encrypted): LOCAL `{command, args, env[, cwd]}`, REMOTE `{url, transport, headers}`.

    Names are the config keys as written; the caller validates them as Tool names
    (see `suggest_tool_name`).
    """
    tools: list[ToolSpec] = []
    errors: list[EntryError] = []
    for index, (key, spec) in enumerate(_servers_map(doc).items()):
        name = str(key).strip()
        if not name:
            errors.append(EntryError(None, f"server #{index} has an empty name", index))
            continue
        try:
            kind, config = _server_config(spec)
        except ValueError as exc:
            errors.append(EntryError(name, str(exc), index))
            continue
        tools.append((name, kind, config))
    return tools, errors


# --- official MCP registry ---------------------------------------------------------------------------

def parse_official_registry(doc: Any, *, prefer: Prefer = "remote") -> ParseResult:
    """One page of the official MCP Registry API v0.1 (`{"servers": [...], "metadata": {...}}`)."""
    items = doc.get("servers") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise CatalogError(
            f'format "official_registry" expects a registry page {{"servers": [...]}}; got {describe(doc)}'
        )
    out = Collector()
    for index, item in enumerate(items):
        server = item.get("server", item) if isinstance(item, dict) else None
        name = name_of(server)
        if not isinstance(server, dict):
            out.error(None, f"item #{index} is not a JSON object", index)
        elif name is None:
            out.error(None, f"item #{index} has no name", index)
        else:
            try:
                out.add(parse_registry_server(item, server, name, prefer=prefer), index)
            except ValueError as exc:
                out.error(name, str(exc), index)
    return ParseResult(out.entries, out.errors, next_cursor=registry_next_cursor(doc))


__all__ = [
    "EXPECTED",
    "describe",
    "detect",
    "mcp_servers_to_tools",
    "parse_document",
    "parse_list",
    "parse_mcp_servers",
    "parse_official_registry",
]
