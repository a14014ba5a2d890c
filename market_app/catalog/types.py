"""Plain data types shared by the catalog parsers and fetcher: entries, per-entry errors, results."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from core.codes import ApiCode
from market_app.catalog.shell import is_shell_command

Kind = Literal["LOCAL", "REMOTE"]
Status = Literal["active", "deprecated", "removed"]
Transport = Literal["streamable_http", "sse"]
Format = Literal["auto", "list", "mcp_servers", "official_registry"]

FORMATS: tuple[str, ...] = ("auto", "list", "mcp_servers", "official_registry")

# Field sizes of MarketEntry: a catalog must not be able to make an upsert fail or bloat the table.
MAX_NAME = 200
MAX_TITLE = 200
MAX_VERSION = 64
MAX_DESCRIPTION = 10_000


class CatalogError(Exception):
    """The response or document is not a usable catalog; `code` is a stable snake_case identifier.

    Messages never contain request header values or URL query strings.
    """

    def __init__(self, message: str, *, code: ApiCode = ApiCode.NOT_A_CATALOG) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class RequiredVar:
    """An env variable (LOCAL), header (REMOTE) or `{placeholder}` the installer must supply."""

    name: str
    is_secret: bool = False
    is_required: bool = True
    description: str = ""
    default: str | None = None
    # Used only inside other values (arguments, a URL, a header or env template): never set as an env
    # variable or header of its own name.
    template_only: bool = False


@dataclass
class EntryData:
    """One installable catalog entry, already mapped to a Toolhub LOCAL or REMOTE tool shape.

    `install` is LOCAL `{"command", "args", "env"}` or REMOTE `{"url", "transport", "headers"}`.
    `install.env` / `install.headers` hold only non-secret values that the catalog supplied; every
    variable or header the catalog declares is listed in `required_env` / `required_headers`
    (secrets with `default=None`). Placeholders `{NAME}` left in `install` args, URL or header values
    name a RequiredVar of the same name (REMOTE URL variables are listed in `required_env`).

    `content_hash` covers everything the user installs or reads (name, title, description, version,
    kind, install, required vars) and deliberately not `status`, `updated_at` or the derived
    `is_shell_command`: a deprecation is not a new version of the tool, so a Tool loaded from the
    entry is not offered an update because of it. Refresh compares `(content_hash, status)`.
    """

    name: str
    title: str
    description: str
    version: str
    kind: Kind
    install: dict[str, Any]
    required_env: list[RequiredVar]
    required_headers: list[RequiredVar]
    status: Status
    content_hash: str
    is_shell_command: bool
    updated_at: str | None = None  # the registry's RFC 3339 updatedAt, when the format has one

    @classmethod
    def build(
        cls,
        *,
        name: str,
        kind: Kind,
        install: dict[str, Any],
        title: str = "",
        description: str = "",
        version: str = "",
        required_env: list[RequiredVar] | None = None,
        required_headers: list[RequiredVar] | None = None,
        status: Status = "active",
        updated_at: str | None = None,
    ) -> EntryData:
        """Make an entry, computing `content_hash` and `is_shell_command`.

        Raises ValueError for a name or version too long to store; long titles and descriptions are cut.
        """
        if len(name) > MAX_NAME:
            raise ValueError(f"name longer than {MAX_NAME} characters")
        if len(version) > MAX_VERSION:
            raise ValueError(f"version longer than {MAX_VERSION} characters")
        entry = cls(
            name=name,
            title=(title or name)[:MAX_TITLE],
            description=description[:MAX_DESCRIPTION],
            version=version,
            kind=kind,
            install=install,
            required_env=list(required_env or []),
            required_headers=list(required_headers or []),
            status=status,
            content_hash="",
            is_shell_command=False,
            updated_at=updated_at,
        )
        entry.content_hash = content_hash(entry)
        if kind == "LOCAL":
            entry.is_shell_command = is_shell_command(install.get("command", ""), install.get("args", []))
        return entry

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for JSONFields and API payloads)."""
        return asdict(self)


def canonical_json(value: Any) -> str:
    """Key-order independent JSON used for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(entry: EntryData) -> str:
    """sha256 hex of the canonical JSON of what an entry installs (see EntryData)."""

    def vars_(items: list[RequiredVar]) -> list[dict[str, Any]]:
        # Declaration order carries no meaning, so it must not change the hash. (vars() not asdict():
        # this runs for every entry of every refresh.)
        # Flags at their default are left out, so adding one does not re-hash every stored entry.
        rows = [{k: x for k, x in vars(v).items() if not (k == "template_only" and x is False)} for v in items]
        return sorted(rows, key=lambda v: v["name"])

    payload = {
        "name": entry.name,
        "title": entry.title,
        "description": entry.description,
        "version": entry.version,
        "kind": entry.kind,
        "install": entry.install,
        "required_env": vars_(entry.required_env),
        "required_headers": vars_(entry.required_headers),
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


@dataclass
class EntryError:
    """An item of the catalog that could not be mapped; `name` is None when the item has none."""

    name: str | None
    reason: str
    index: int | None = None  # position in its payload (page), for items without a usable name
    code: str = "unmappable"  # or e.g. "http_listener_package"


@dataclass
class ParseResult:
    """What one document (or one registry page) yielded."""

    entries: list[EntryData] = field(default_factory=list)
    errors: list[EntryError] = field(default_factory=list)
    next_cursor: str | None = None
    format: str = ""  # the format actually parsed (useful with "auto")
    ranks: dict[str, Any] = field(default_factory=dict)  # registry: name -> version rank of the kept entry
    failed_ranks: dict[str, Any] = field(default_factory=dict)  # registry: name -> best rank that failed to map
