"""Parse catalog documents (simple list, mcpServers client config, official registry page) into entries."""

from __future__ import annotations

import re
from typing import Any

from core.codes import ApiCode
from market_app.catalog.common import (
    Collector,
    VersionCollector,
    looks_secret,
    name_of,
    status_of,
    str_dict,
    str_list,
    text,
    transport_of,
    vars_from_values,
)
from market_app.catalog.registry import (
    Prefer,
    normalize,
    parse_registry_server,
    registry_next_cursor,
    version_rank,
)
from market_app.catalog.types import FORMATS, CatalogError, EntryData, ParseResult, RequiredVar
from tools_app.client_config import (
    REFERENCE,
    ClientConfigError,
    ClientServer,
    HttpListenerPackage,
    is_client_config,
    parse_client_config,
    split_command,
    transport_for,
)

EXPECTED = (
    'expected a JSON array, {"data": [...]}, {"mcpServers": {...}} '
    'or an MCP registry page {"servers": [...]}'
)


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
        return "official_registry" if is_seed_list(doc) else "list"
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
        if is_client_config(doc):  # VS Code settings: {"mcp": {"servers": {...}}}
            return "mcp_servers"
    raise CatalogError(f"not a catalog: {EXPECTED}; got {describe(doc)}")


def parse_document(doc: Any, fmt: str = "auto", *, prefer: Prefer = "remote") -> ParseResult:
    """Parse one JSON document (or one registry page) in format `fmt` ("auto" detects it).

    Items that cannot be mapped become EntryErrors naming the item; later duplicates of a name too.
    """
    if fmt not in FORMATS:
        raise CatalogError(f"unknown catalog format {fmt!r}; accepted: {', '.join(FORMATS)}",
                           code=ApiCode.UNKNOWN_FORMAT)
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
                out.error(name, str(exc), index, getattr(exc, "code", "unmappable"))
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
    if url and (command or package):
        # A program that serves HTTP itself: the URL alone would aim at a port nothing opened.
        stated = text(item.get("transport") or item.get("type"))
        transport = (transport_of(stated) or stated) if stated else transport_for("", url)
        raise HttpListenerPackage(transport or "http", url, command or package)
    if url:
        return _remote(common, url, item.get("transport") or item.get("type"), item.get("headers"))
    if command:
        return _local(common, command, item.get("args"), item.get("env"))
    if package:
        return _local(common, "npx", ["-y", package], item.get("env"))
    raise ValueError("no baseUrl/url, command or package: nothing to install")


def _remote(common: dict[str, Any], url: str, transport_raw: Any, headers_raw: Any) -> EntryData:
    # Without a stated transport the URL decides, as for client configs (`.../sse` is the SSE transport).
    transport = transport_of(transport_raw) if text(transport_raw) else transport_for("", url)
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

def parse_mcp_servers(doc: Any) -> ParseResult:
    """A client config (`mcpServers`, or VS Code `servers` + `inputs`) as catalog entries.

    The reading rules are the tools import's own (tools_app.client_config); `${env:X}` / `${input:x}`
    references become variables to supply. Values a catalog wrote under secret-looking names are not kept.
    """
    try:
        servers, problems = parse_client_config(doc)
    except ClientConfigError:
        raise CatalogError(f'format "mcp_servers" expects {{"mcpServers": {{...}}}}; got {describe(doc)}') from None
    out = Collector()
    for problem in problems:
        out.error(problem.name, problem.reason, problem.index, problem.code)
    for index, server in enumerate(servers):
        common = {"name": server.name, "title": server.title or server.name, "description": server.description}
        try:
            out.add(_client_entry(server, common), index)
        except ValueError as exc:
            out.error(server.name, str(exc), index, getattr(exc, "code", "unmappable"))
    return ParseResult(out.entries, out.errors)


def _client_entry(server: ClientServer, common: dict[str, Any]) -> EntryData:
    """One client-config server as an entry: references become `{name}` placeholders and variables.

    A value that is one whole reference (`"API_KEY": "${env:API_KEY}"`) declares the variable under its
    own key; a reference inside other text declares a template variable of the reference's name.
    """
    config = server.config
    refs = {v.name: v for v in server.variables}
    template_vars: dict[str, RequiredVar] = {}

    def placeholder(text_: str) -> str:
        def one(match: re.Match[str]) -> str:
            ref = refs[match.group(2)]
            template_vars.setdefault(ref.name, RequiredVar(
                name=ref.name, is_secret=ref.is_secret, is_required=True, description=ref.description,
                template_only=True))
            return "{" + ref.name + "}"
        return REFERENCE.sub(one, text_)

    def values(section: dict[str, str]) -> tuple[dict[str, str], list[RequiredVar]]:
        plain = {k: ("" if REFERENCE.fullmatch(v) else v) for k, v in section.items()}
        kept, declared = vars_from_values({k: v for k, v in plain.items() if not REFERENCE.search(v)})
        for key, value in section.items():
            if REFERENCE.fullmatch(value):
                ref = refs[REFERENCE.fullmatch(value).group(2)]  # type: ignore[union-attr]
                declared.append(RequiredVar(name=key, is_secret=ref.is_secret or looks_secret(key),
                                            is_required=True, description=ref.description))
            elif REFERENCE.search(value):
                kept[key] = placeholder(value)
                declared.append(RequiredVar(name=key, is_secret=False, is_required=False, default=kept[key]))
        return kept, declared

    if server.kind == "LOCAL":
        env, env_vars = values(config.get("env") or {})
        args = [placeholder(a) for a in config.get("args") or []]
        install = {"command": placeholder(config["command"]), "args": args, "env": env}
        return EntryData.build(kind="LOCAL", install=install,
                               required_env=[*env_vars, *template_vars.values()], **common)
    headers, header_vars = values(config.get("headers") or {})
    url = placeholder(config["url"])
    url_vars = [v for v in template_vars.values() if "{" + v.name + "}" in url]
    header_vars += [v for v in template_vars.values() if v not in url_vars]
    install = {"url": url, "transport": config["transport"], "headers": headers}
    return EntryData.build(kind="REMOTE", install=install, required_env=url_vars,
                           required_headers=header_vars, **common)


# --- official MCP registry ---------------------------------------------------------------------------

def parse_official_registry(doc: Any, *, prefer: Prefer = "remote") -> ParseResult:
    """One page of the official MCP Registry API v0.1 (`{"servers": [...], "metadata": {...}}`), or a
    2025-05 seed file (a JSON array of server records in snake_case).

    A registry that ignores `version=latest` lists every version of a server: the one kept is the
    registry's `isLatest`, else the highest semantic version (see `version_rank`); the others are
    dropped silently. The same version listed twice is a duplicate error.
    """
    items = doc.get("servers") if isinstance(doc, dict) else doc if is_seed_list(doc) else None
    if not isinstance(items, list):
        raise CatalogError(
            f'format "official_registry" expects a registry page {{"servers": [...]}}; got {describe(doc)}'
        )
    out = VersionCollector()
    for index, raw in enumerate(items):
        item = normalize(raw) if isinstance(raw, dict) else raw
        server = item.get("server", item) if isinstance(item, dict) else None
        name = name_of(server)
        if not isinstance(item, dict) or not isinstance(server, dict):
            out.error(None, f"item #{index} is not a JSON object", index)
        elif name is None:
            out.error(None, f"item #{index} has no name", index)
        else:
            warnings: list[str] = []
            try:
                entry = parse_registry_server(item, server, name, prefer=prefer, warnings=warnings)
            except ValueError as exc:
                out.error(name, str(exc), index, getattr(exc, "code", "unmappable"))
                out.fail(name, version_rank(item, server))
                continue
            if out.offer(entry, version_rank(item, server), index):
                for warning in warnings:
                    out.error(name, f"mapped; {warning}", index)
    return ParseResult(out.entries, out.errors, next_cursor=registry_next_cursor(doc), ranks=out.ranks,
                       failed_ranks=out.failed)


def is_seed_list(doc: Any) -> bool:
    """A top-level array of registry server records (the 2025-05 seed format), not a simple list."""
    return isinstance(doc, list) and any(
        isinstance(i, dict) and ("version_detail" in i or "packages" in i or "remotes" in i) for i in doc[:20])


__all__ = [
    "EXPECTED",
    "describe",
    "detect",
    "is_seed_list",
    "parse_document",
    "parse_list",
    "parse_mcp_servers",
    "parse_official_registry",
]
