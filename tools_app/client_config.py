"""Read MCP client config files (Claude Desktop, Cursor, Cline, Windsurf, VS Code) as tool definitions.

Django-free: the tools import and the market's `mcp_servers` catalog format both read through here.
Accepted shapes: `{"mcpServers": {...}}` (Claude Desktop, Cursor, Cline, Windsurf, Roo), VS Code's
`{"servers": {...}, "inputs": [...]}` and VS Code settings `{"mcp": {"servers": ..., "inputs": ...}}`.

Per server it maps: `disabled: true` / `enabled: false` -> the tool starts DISABLED; `autoApprove` /
`alwaysAllow` -> function names that may skip approval (the caller applies tenant policy); `timeout`
-> the call timeout; `${env:X}`, `${input:x}` and `${X}` references -> variables the user must supply
(never kept as literal text); an untyped URL whose path ends in `/sse` (Cursor) -> the SSE transport.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from core.codes import ApiCode
from tools_app.configs.base import TIMEOUT_RANGE  # the tool config's bounds

Kind = Literal["LOCAL", "REMOTE"]

# `${env:NAME}` / `${input:id}` (VS Code, Cursor) and `${NAME}` (Claude Code, Windsurf).
REFERENCE = re.compile(r"\$\{(?:(env|input):)?([A-Za-z_][A-Za-z0-9_.-]*)\}")
SHELL_SYNTAX = re.compile(r"[;&|`<>]|\$\(|\$\{|\n")
# A timeout above this is read as milliseconds (some clients write 60000 for one minute).
MILLISECONDS_ABOVE = 1000
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE")
ACCEPTED = ('{"mcpServers": {...}} (Claude Desktop, Cursor, Cline, Windsurf) or '
            '{"servers": {...}, "inputs": [...]} (VS Code)')


class ClientConfigError(ValueError):
    """The document is not a client config at all (per-server problems are ServerProblems instead)."""


class HttpListenerPackage(ValueError):
    """A server definition that starts a program which serves MCP over its own HTTP listener (a command
    together with an HTTP URL/transport). Toolhub starts LOCAL servers over stdio only, so it is refused
    rather than started (nothing would answer on stdio) or turned into a REMOTE tool pointing at a port
    that nobody opened."""

    code = ApiCode.HTTP_LISTENER_PACKAGE

    def __init__(self, transport: str, url: str, command: str = "") -> None:
        what = f"{command!r} " if command else ""
        super().__init__(
            f"the package {what}runs its own HTTP listener ({transport} at {url or '(no url)'}); Toolhub starts "
            "LOCAL servers over stdio only. Use a stdio package or a remote of this server, or run it "
            "yourself and add its URL as a REMOTE tool"
        )

    @classmethod
    def joined(cls, message: str) -> HttpListenerPackage:
        """The refusal with a message already built (several packages, each an HTTP listener)."""
        error = cls.__new__(cls)
        ValueError.__init__(error, message)
        return error


@dataclass
class Variable:
    """A `${...}` reference the user must supply a value for.

    `source` is "env" (the user's environment), "input" (a VS Code input prompt) or "var" (`${X}`);
    `used_in` lists where it appears (`env.API_KEY`, `args[2]`, `url`, `headers.Authorization`).
    """

    name: str
    source: str
    description: str = ""
    is_secret: bool = False
    used_in: list[str] = field(default_factory=list)

    @property
    def token(self) -> str:
        return f"${{{self.source}:{self.name}}}" if self.source != "var" else f"${{{self.name}}}"


@dataclass
class ClientServer:
    """One server of a client config as a LOCAL or REMOTE tool definition (values as the user wrote them,
    `${...}` references still in place: see `substitute`)."""

    name: str
    kind: Kind
    config: dict[str, Any]
    title: str = ""
    description: str = ""
    disabled: bool = False
    auto_approve: list[str] = field(default_factory=list)
    variables: list[Variable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class ServerProblem:
    name: str | None
    reason: str
    index: int
    code: str = "unmappable"


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def is_client_config(doc: Any) -> bool:
    """True for any accepted client config shape."""
    try:
        _servers_and_inputs(doc)
    except ClientConfigError:
        return False
    return True


def _servers_and_inputs(doc: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    holder = doc.get("mcp") if isinstance(doc, dict) and isinstance(doc.get("mcp"), dict) else doc
    if isinstance(holder, dict):
        servers = holder.get("mcpServers", holder.get("servers"))
        if isinstance(servers, dict):
            inputs: dict[str, dict[str, Any]] = {}
            for item in holder.get("inputs") or []:
                if isinstance(item, dict) and isinstance(item.get("id"), str):
                    inputs[item["id"]] = item
            return servers, inputs
    raise ClientConfigError(f"not a client config; expected {ACCEPTED}")


def _text(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, int | float | str):
        return str(value).strip()
    return ""


def _str_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str | int | float) and not isinstance(v, bool)
                                       for v in value):
        return [str(v) for v in value]
    raise ValueError(f"{what} must be a list of strings")


def _str_dict(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): _text(v) if not isinstance(v, bool) else str(v).lower() for k, v in value.items()}
    raise ValueError(f"{what} must be an object of name: value")


def split_command(command: str, args: list[str]) -> tuple[str, list[str]]:
    """`"npx -y pkg"` with no args becomes `npx`, `[-y, pkg]`; shell syntax is left whole."""
    if args or not any(c.isspace() for c in command.strip()) or SHELL_SYNTAX.search(command):
        return command.strip(), args
    try:
        parts = shlex.split(command)
    except ValueError:
        return command.strip(), args
    return (parts[0], parts[1:]) if parts else (command.strip(), args)


def transport_for(type_raw: str, url: str) -> str | None:
    """The Tool transport for a client `type` and URL; None for a type Toolhub cannot speak.

    Without a type, a URL whose path ends in `/sse` is the legacy SSE transport (Cursor writes such
    entries with the URL alone); anything else is streamable HTTP.
    """
    key = type_raw.lower().replace("_", "-")
    if key in ("http", "streamable-http", "streamablehttp", "streamable"):
        return "streamable_http"
    if key == "sse":
        return "sse"
    if key == "":
        return "sse" if urlsplit(url).path.rstrip("/").endswith("/sse") else "streamable_http"
    return None


def timeout_seconds(value: Any) -> tuple[float | None, str]:
    """A client `timeout` as seconds within the tool config's bounds, and a note when it was adjusted."""
    if value is None or isinstance(value, bool):
        return None, ""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None, f"timeout {value!r} is not a number; the default call timeout applies"
    note = ""
    if seconds > MILLISECONDS_ABOVE:
        seconds /= 1000
        note = f"timeout {value} read as milliseconds"
    lo, hi = TIMEOUT_RANGE
    if not lo <= seconds <= hi:
        clamped = min(max(seconds, lo), hi)
        note = f"timeout {value} is outside {lo}..{hi} s; {clamped:g} s is used"
        seconds = clamped
    return seconds, note


def _server(name: str, spec: Any, inputs: dict[str, dict[str, Any]]) -> ClientServer:
    if not isinstance(spec, dict):
        raise ValueError("server definition is not a JSON object")
    notes: list[str] = []
    kind, config, timeout_key = _install(spec, notes)
    seconds, note = timeout_seconds(spec.get("timeout"))
    if seconds is not None:
        config[timeout_key] = seconds
    if note:
        notes.append(note)
    disabled = spec.get("disabled") is True or spec.get("enabled") is False
    auto = spec.get("autoApprove", spec.get("alwaysAllow"))
    auto_approve = [a.strip() for a in _str_list(auto, "autoApprove") if a.strip()]
    return ClientServer(
        name=name, kind=kind, config=config, title=_text(spec.get("title")),
        description=_text(spec.get("description")), disabled=disabled,
        auto_approve=list(dict.fromkeys(auto_approve)), variables=_references(config, inputs), notes=notes,
    )


def _install(spec: dict[str, Any], notes: list[str]) -> tuple[Kind, dict[str, Any], str]:
    """A server definition's kind, its Toolhub config, and the config key its timeout goes to."""
    type_raw = _text(spec.get("type") or spec.get("transport"))
    url = _text(spec.get("url")) or _text(spec.get("serverUrl")) or _text(spec.get("httpUrl"))
    command = _text(spec.get("command"))
    if command and url and type_raw.lower() != "stdio":
        # Both: a program that serves HTTP itself. Taking only the URL would aim at a port nothing opened.
        raise HttpListenerPackage(transport_for(type_raw, url) or type_raw or "http", url, command)
    if type_raw.lower() == "stdio" or (command and not url):
        if not command:
            raise ValueError('type "stdio" without a command')
        return "LOCAL", _local_config(spec, command, notes), "call_timeout_s"
    if not url:
        raise ValueError("neither a command nor a url/serverUrl")
    transport = transport_for(type_raw, url)
    if transport is None:
        raise ValueError(f"unsupported type {type_raw.lower()!r}; accepted: stdio, http, streamable-http, sse")
    return "REMOTE", {"url": url, "transport": transport,
                      "headers": _str_dict(spec.get("headers"), "headers")}, "timeout_s"


def _local_config(spec: dict[str, Any], command: str, notes: list[str]) -> dict[str, Any]:
    cmd, args = split_command(command, _str_list(spec.get("args"), "args"))
    config: dict[str, Any] = {"command": cmd, "args": args, "env": _str_dict(spec.get("env"), "env")}
    if _text(spec.get("cwd")):
        config["cwd"] = _text(spec.get("cwd"))
    if spec.get("envFile"):
        notes.append("envFile is not read; set its variables in env")
    return config


def _places(config: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, text) of every string value of a config that may hold a `${...}` reference."""
    out: list[tuple[str, str]] = []
    for key in ("command", "url", "cwd"):
        if isinstance(config.get(key), str):
            out.append((key, config[key]))
    out += [(f"args[{i}]", a) for i, a in enumerate(config.get("args") or [])]
    for section in ("env", "headers"):
        out += [(f"{section}.{k}", v) for k, v in (config.get(section) or {}).items()]
    return out


def _references(config: dict[str, Any], inputs: dict[str, dict[str, Any]]) -> list[Variable]:
    found: dict[tuple[str, str], Variable] = {}
    for where, value in _places(config):
        for match in REFERENCE.finditer(value):
            source, name = match.group(1) or "var", match.group(2)
            var = found.get((source, name))
            if var is None:
                prompt = inputs.get(name, {}) if source == "input" else {}
                secret = bool(prompt.get("password")) or looks_secret(name) or (
                    where.startswith(("env.", "headers.")) and looks_secret(where.split(".", 1)[1]))
                var = found[(source, name)] = Variable(
                    name=name, source=source, description=_text(prompt.get("description")), is_secret=secret)
            elif where.startswith(("env.", "headers.")) and looks_secret(where.split(".", 1)[1]):
                var.is_secret = True
            var.used_in.append(where)
    return list(found.values())


def substitute(config: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """The config with every `${...}` reference replaced by its value (by name), or by "" when none is
    given: a reference is never kept as literal text."""

    def sub(text: str) -> str:
        return REFERENCE.sub(lambda m: values.get(m.group(2), ""), text)

    out = dict(config)
    for key in ("command", "url", "cwd"):
        if isinstance(out.get(key), str):
            out[key] = sub(out[key])
    if "args" in out:
        out["args"] = [sub(a) for a in out["args"]]
    for section in ("env", "headers"):
        if section in out:
            out[section] = {k: sub(v) for k, v in out[section].items()}
    return out


def parse_client_config(doc: Any) -> tuple[list[ClientServer], list[ServerProblem]]:
    """Every server of a client config, and the servers that could not be read (with the reason).

    Raises ClientConfigError when `doc` is no client config at all.
    """
    servers, inputs = _servers_and_inputs(doc)
    out: list[ClientServer] = []
    problems: list[ServerProblem] = []
    for index, (key, spec) in enumerate(servers.items()):
        name = str(key).strip()
        if not name:
            problems.append(ServerProblem(None, f"server #{index} has an empty name", index))
            continue
        try:
            out.append(_server(name, spec, inputs))
        except ValueError as exc:
            problems.append(ServerProblem(name, str(exc), index, getattr(exc, "code", "unmappable")))
    return out, problems


__all__ = [
    "ACCEPTED",
    "ClientConfigError",
    "ClientServer",
    "HttpListenerPackage",
    "ServerProblem",
    "Variable",
    "is_client_config",
    "looks_secret",
    "parse_client_config",
    "substitute",
    "timeout_seconds",
    "transport_for",
]
