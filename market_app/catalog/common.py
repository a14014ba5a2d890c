"""Helpers shared by the format parsers: field coercion, secret-looking names, duplicates, transports."""

from __future__ import annotations

import re
from typing import Any

from market_app.catalog.types import EntryData, EntryError, RequiredVar, Status, Transport

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
TOOL_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

STATUS_ALIASES: dict[str, Status] = {
    "active": "active",
    "deprecated": "deprecated",
    "deleted": "removed",
    "removed": "removed",
}


def looks_secret(name: str) -> bool:
    """A variable or header name that probably holds a credential (API_KEY, X-Auth-Token, ...)."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def text(value: Any) -> str:
    """A string field, tolerating null and numbers (versions are sometimes written as 1.2)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float | str):
        return str(value).strip()
    return ""


def name_of(item: Any) -> str | None:
    if isinstance(item, dict):
        value = item.get("name")
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def status_of(value: Any) -> Status:
    return STATUS_ALIASES.get(text(value).lower(), "active")


def transport_of(value: Any) -> Transport | None:
    """Map the many spellings of an HTTP transport; None for unknown ones (stdio is not HTTP)."""
    key = text(value).lower().replace("_", "-")
    if key in ("", "http", "streamable-http", "streamablehttp", "streamable"):
        return "streamable_http"
    if key == "sse":
        return "sse"
    return None


def str_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return [str(v) for v in value]
    raise ValueError(f"{what} must be a list of strings")


def str_dict(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): text(v) for k, v in value.items()}
    raise ValueError(f"{what} must be an object of name: value")




def vars_from_values(values: dict[str, str]) -> tuple[dict[str, str], list[RequiredVar]]:
    """Split catalog-supplied env/header values into kept defaults and declared variables.

    A value under a secret-looking name is a placeholder at best (and a leaked credential at worst):
    it is neither kept nor offered as a default, and the variable is required. A non-secret value is a
    default; an empty one means the variable must be supplied.
    """
    kept: dict[str, str] = {}
    declared: list[RequiredVar] = []
    for key, value in values.items():
        if looks_secret(key):
            declared.append(RequiredVar(name=key, is_secret=True, is_required=True))
        elif value:
            kept[key] = value
            declared.append(RequiredVar(name=key, is_required=False, default=value))
        else:
            declared.append(RequiredVar(name=key, is_required=True))
    return kept, declared


def placeholders(value: str) -> list[str]:
    return PLACEHOLDER.findall(value)


def _slug(text_: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", text_.lower()).strip("-_")


# Namespace prefixes that say where the publisher lives, not who it is.
HOSTING_PREFIXES = (("io", "github"), ("io", "gitlab"), ("com", "github"), ("org", "codeberg"))


def suggest_tool_name(name: str) -> str:
    """A Tool name (`^[a-z0-9][a-z0-9_-]{0,63}$`) derived from a catalog name.

    Registry names are reverse-DNS `namespace/server`: the publisher part of the namespace (without its
    top-level domain, or without `io.github.` for GitHub owners) joins the server part, so that the many
    servers called `mcp` or `mcp-server` get distinct names: `io.github.x/y` -> `x-y`,
    `com.figma.mcp/mcp` -> `figma-mcp`. The publisher part is shortened first to fit 64 characters.
    """
    namespace, _, server = name.rpartition("/")
    server_slug = _slug(server) or _slug(name)
    labels = [label for label in namespace.split(".") if label]
    if len(labels) >= 2:
        prefix = next((p for p in HOSTING_PREFIXES if tuple(labels[:2]) == p), None)
        labels = labels[2:] if prefix else labels[1:]
    elif namespace and "." not in namespace:
        labels = [namespace]
    owner = _slug("-".join(labels))
    if owner and (server_slug == owner or server_slug.startswith(owner + "-")):
        owner = ""  # the server part already names its publisher
    if owner and owner.endswith("-" + server_slug):
        owner = owner[: -len(server_slug) - 1]  # `com.figma.mcp/mcp`: do not say `mcp` twice
    room = 64 - len(server_slug) - 1
    slug = f"{owner[:room].rstrip('-_')}-{server_slug}" if owner and room > 0 else server_slug
    slug = slug[:64].rstrip("-_")
    return slug if TOOL_NAME.match(slug) else "server"


def unique_name(base: str, taken: set[str]) -> str:
    """`base`, or `base-2`, `base-3`, ... (kept within 64 characters) when it is taken."""
    if base not in taken:
        return base
    for n in range(2, 10_000):
        suffix = f"-{n}"
        candidate = base[: 64 - len(suffix)].rstrip("-_") + suffix
        if candidate not in taken:
            return candidate
    raise ValueError("no free name")


class Collector:
    """Accumulates entries and errors, keeping the first of duplicate names."""

    def __init__(self) -> None:
        self.entries: list[EntryData] = []
        self.errors: list[EntryError] = []
        self.seen: set[str] = set()

    def add(self, entry: EntryData, index: int | None = None) -> None:
        if entry.name in self.seen:
            self.errors.append(
                EntryError(entry.name, "duplicate name: an earlier entry with this name was kept", index)
            )
            return
        self.seen.add(entry.name)
        self.entries.append(entry)

    def error(self, name: str | None, reason: str, index: int | None = None, code: str = "unmappable") -> None:
        self.errors.append(EntryError(name, reason, index, code))


class VersionCollector(Collector):
    """A Collector for registry listings that may hold several versions of a server: the best-ranked
    version (see registry.version_rank) is kept; the same rank twice is a duplicate error."""

    def __init__(self) -> None:
        super().__init__()
        self.ranks: dict[str, Any] = {}
        self.at: dict[str, int] = {}
        self.failed: dict[str, Any] = {}  # name -> best rank among the versions that could not be mapped

    def fail(self, name: str, rank: Any) -> None:
        """A version of `name` could not be mapped. If it outranks the version kept, the server is not listed at
        an older version (a registry ignoring `version=latest` sends them all): it is unmappable at its latest."""
        if name in self.failed and not rank > self.failed[name]:
            return
        self.failed[name] = rank
        if name in self.ranks and rank > self.ranks[name]:
            self.entries = [e for e in self.entries if e.name != name]
            self.at = {e.name: i for i, e in enumerate(self.entries)}
            self.seen.discard(name)
            del self.ranks[name]

    def offer(self, entry: EntryData, rank: Any, index: int | None = None) -> bool:
        """Keep `entry` if it is the best version seen of its name (and no newer version failed to map); True when
        it was kept."""
        if entry.name in self.failed and self.failed[entry.name] > rank:
            return False
        if entry.name not in self.seen:
            self.at[entry.name] = len(self.entries)
            self.ranks[entry.name] = rank
            self.add(entry, index)
            return True
        current = self.ranks[entry.name]
        if rank == current and entry.version == self.entries[self.at[entry.name]].version:
            self.add(entry, index)  # reported as a duplicate
            return False
        if rank > current:
            self.entries[self.at[entry.name]] = entry
            self.ranks[entry.name] = rank
            return True
        return False
