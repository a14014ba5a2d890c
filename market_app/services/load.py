"""Load market entries into a tenant as tools, and bring loaded tools up to a newer entry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.errors import DomainError
from core.urls import same_origin
from market_app import selectors
from market_app.catalog import suggest_tool_name
from market_app.catalog.common import unique_name
from market_app.errors import (
    EntryRemoved,
    MissingVariables,
    NoUpdateAvailable,
    UnknownVariables,
)
from market_app.models import EntryStatus, MarketEntry
from market_app.services.kinds import Values, install_kind
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors as tool_selectors
from tools_app.configs import mask_config, validate_config
from tools_app.configs.auth import Draft, is_oauth_tool
from tools_app.errors import InvalidConfig, NameTaken
from tools_app.models import Tool, ToolStatus
from tools_app.services import ToolInput, screening, tool_create, tool_update

SHELL_MESSAGE = (
    "This entry runs a shell command line, which can do anything on the worker: the tool was created "
    "DISABLED. Review its command and arguments, then enable it."
)
MAX_BATCH = 100


@dataclass
class Loaded:
    tool: Tool
    message: str = ""


def _resolve(declared: list[dict[str, Any]], given: dict[str, str], defaults: dict[str, str],
             what: str) -> tuple[dict[str, str], list[str]]:
    """Values for the declared variables (given, else default) and the names still missing."""
    names = [v["name"] for v in declared]
    unknown = sorted(set(given) - set(names))
    if unknown:
        accepted = ", ".join(names) or "(none)"
        raise UnknownVariables(
            f"{what} {', '.join(unknown)} not declared by this entry; accepted {what}: {accepted}",
            details={"field": what, "unknown": unknown, "accepted": names},
        )
    values: dict[str, str] = {}
    missing: list[str] = []
    for var in declared:
        name = var["name"]
        if given.get(name):
            values[name] = given[name]
        elif var.get("default") is not None:
            values[name] = str(var["default"])
        elif name in defaults:
            values[name] = defaults[name]
        elif var.get("is_required"):
            missing.append(name)
    return values, missing


def _values(entry: MarketEntry, *, env: dict[str, str], headers: dict[str, str]) -> Values:
    """The entry's variables resolved from these values and its defaults; MissingVariables names what is missing."""
    install = entry.install or {}
    env_values, env_missing = _resolve(entry.required_env, env, dict(install.get("env") or {}), "env")
    header_values, header_missing = _resolve(entry.required_headers, headers, dict(install.get("headers") or {}),
                                             "headers")
    if env_missing or header_missing:
        parts = [f"{what} {', '.join(names)}" for what, names in (("env", env_missing), ("headers", header_missing))
                 if names]
        raise MissingVariables(
            f"values required for {'; '.join(parts)} (send them in \"env\" / \"headers\")",
            details={"env": env_missing, "headers": header_missing},
        )
    secrets = {v["name"] for v in [*entry.required_env, *entry.required_headers] if v.get("is_secret")}
    return Values(env=env_values, headers=header_values, secrets=secrets)


def build_config(entry: MarketEntry, *, env: dict[str, str], headers: dict[str, str]) -> dict[str, Any]:
    """The Tool config an entry installs with these values; MissingVariables/UnknownVariables name names."""
    return install_kind(entry.kind).config(entry, _values(entry, env=env, headers=headers))


def entry_load(*, tenant: Tenant, actor: Any, entry_id: Any, name: str | None = None,
               env: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Loaded:
    """Create a LOCAL/REMOTE tool from a visible entry; shell one-liners are created DISABLED."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    entry = selectors.entry_get(tenant=tenant, entry_id=entry_id)
    if entry.status == EntryStatus.REMOVED:
        raise EntryRemoved(f"{entry.name!r} was removed from its catalog and cannot be loaded",
                           details={"entry_id": entry.pk})
    config = install_kind(entry.kind).with_oauth_if_asked(entry, build_config(entry, env=env or {},
                                                                              headers=headers or {}))
    tool_name = name or suggest_tool_name(entry.name)
    screen = entry_screen(entry, tenant)
    held = screen["status"] == "held"
    data = ToolInput(
        name=tool_name,
        description=(entry.description or entry.title)[:2000],
        type=entry.kind,
        status=ToolStatus.DISABLED if entry.is_shell_command or held else ToolStatus.ENABLED,
        config=config,
    )
    try:
        tool = tool_create(tenant=tenant, actor=actor, data=data, market_entry=entry)
    except NameTaken as exc:
        raise NameTaken(f'{exc.message}; send "name" to load it under another name',
                        details={"name": tool_name}) from None
    if held:  # the catalog's own words carry instructions aimed at a model: installed, but off until reviewed
        rules = ", ".join(sorted({f["rule"] for f in screen["findings"] if f["severity"] == "high"}))
        return Loaded(tool, f"loaded DISABLED: the screen found text aimed at the model in the catalog entry ({rules}); "
                            "review it, then enable the tool")
    return Loaded(tool, SHELL_MESSAGE if entry.is_shell_command else "")


def entry_screen(entry: MarketEntry, tenant: Tenant | None) -> dict[str, Any]:
    """The screen's findings on what a catalog entry says, under the tenant's policy (hold when unknown)."""
    policy = screening.policy_of(tenant) if tenant is not None else screening.HOLD
    return screening.catalog_screen(title=entry.title, description=entry.description,
                                    variables=[*(entry.required_env or []), *(entry.required_headers or [])],
                                    policy=policy)


@transaction.atomic
def entries_batch_load(*, tenant: Tenant, actor: Any, ids: list[Any]) -> list[dict[str, Any]]:
    """Load each entry under a name derived from its catalog name, each all-or-nothing (one savepoint per
    entry). Entries that suggest the same name (many registry servers are called `mcp`) get `-2`, `-3`:
    a batch never fails with name_taken."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    taken = set(tool_selectors.tool_list(tenant=tenant).values_list("name", flat=True))
    results: list[dict[str, Any]] = []
    for entry_id in list(dict.fromkeys(ids))[:MAX_BATCH]:
        try:
            with transaction.atomic():
                entry = selectors.entry_get(tenant=tenant, entry_id=entry_id)
                name = unique_name(suggest_tool_name(entry.name), taken)
                loaded = entry_load(tenant=tenant, actor=actor, entry_id=entry_id, name=name)
        except DomainError as exc:
            results.append({"id": entry_id, "ok": False, "error": {"code": exc.code, "message": exc.message}})
            continue
        taken.add(loaded.tool.name)
        results.append({"id": entry_id, "ok": True, "tool_id": loaded.tool.pk, "name": loaded.tool.name,
                        "status": loaded.tool.status, "message": loaded.message})
    return results


@dataclass
class UpdateRow:
    """One line of a market update's diff, values as the admin shows them (secrets masked, plain ones shown)."""

    key: str
    before: Any
    after: Any

    @property
    def change(self) -> str:
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        return "changed" if self.before != self.after else "kept"


@dataclass
class UpdatePlan:
    """What "Update from market" would do to a tool: the config it would get, and the diff an admin confirms."""

    tool: Tool
    entry: MarketEntry
    config: dict[str, Any]
    disable: bool
    rows: list[UpdateRow]

    @property
    def changes(self) -> list[UpdateRow]:
        return [row for row in self.rows if row.change != "kept"]


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    """A masked config as `key -> value` rows: env/headers one row per entry, everything else as it is."""
    rows: dict[str, Any] = {}
    for key, value in config.items():
        if key == "not_secret":
            continue
        if isinstance(value, dict) and key in ("env", "headers"):
            rows.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            rows[key] = value
    return rows


def _diff(tool_type: str, old: dict[str, Any], new: dict[str, Any]) -> list[UpdateRow]:
    """Rows for every key of either config; a secret shows as the mask on both sides, so a kept secret reads
    "kept" and a new one "added", never its value."""
    before, after = (_flat(mask_config(tool_type, _stored_form(tool_type, c))) for c in (old, new))
    keys = [*before, *(k for k in after if k not in before)]
    # A setting unset on both sides (a default of None) is no change and no row.
    return [UpdateRow(k, before.get(k), after.get(k)) for k in keys
            if before.get(k) is not None or after.get(k) is not None]


def _stored_form(tool_type: str, config: dict[str, Any]) -> dict[str, Any]:
    """The config as the tool would store it (defaults filled in), so the diff compares like with like: the
    catalog's install names fewer keys than a saved tool, and those were listed as "removed"."""
    try:
        return validate_config(tool_type, config)
    except InvalidConfig:
        return config


def _updatable_entry(tool: Tool) -> MarketEntry:
    """The entry a tool can be updated to; refuses a tool from no entry, a removed entry, or one up to date."""
    entry = tool.market_entry
    if entry is None:
        raise NoUpdateAvailable("this tool was not loaded from the market")
    if entry.status == EntryStatus.REMOVED:
        raise EntryRemoved(f"{entry.name!r} was removed from its catalog; there is nothing to update to",
                           details={"entry_id": entry.pk})
    if entry.content_hash == tool.market_hash:
        raise NoUpdateAvailable(f"the tool already has the current version of {entry.name!r}")
    return entry


def _keep_shown(config: dict[str, Any], old: dict[str, Any], had: set[str]) -> None:
    """A value the user kept secret stays secret: an update never shows what was masked before. A variable the
    tool did not have yet (`had`: its keys before) is shown as the catalog declares it (a new non-secret variable
    is not masked)."""
    was_shown = set(old.get("not_secret") or [])
    shown = [k for k in config.pop("not_secret", []) if k in was_shown or k not in had]
    if shown:
        config["not_secret"] = shown


def _keep_settings(config: dict[str, Any], old: dict[str, Any], kept_on_update: tuple[str, ...]) -> None:
    """The tool's own settings the admin set stay, and so does its OAuth while the server keeps its origin."""
    for key in kept_on_update:
        if old.get(key) is not None:
            config.setdefault(key, old[key])
    if is_oauth_tool(Draft(old)) and same_origin(str(old.get("url") or ""), str(config.get("url") or "")):
        # OAuth is the admin's (or the 401 probe's) setting, kept while the server stays where it was: at another
        # origin it is another authorization server, whose client and connections start again.
        config.setdefault("auth", old["auth"])


def _update_plan(*, tenant: Tenant, tool: Tool, env: dict[str, str] | None,
                 headers: dict[str, str] | None) -> UpdatePlan:
    entry = _updatable_entry(tool)
    kind = install_kind(entry.kind)
    old = tool.config or {}
    stored: dict[str, str] = dict(old.get(kind.secret_map) or {})
    kept = kind.kept(entry, old, stored)
    config = build_config(entry, env={**kept.env, **(env or {})}, headers={**kept.headers, **(headers or {})})
    kind.carry_over(entry, config, old=old, stored=stored, kept=kept, given_headers=headers or {})
    _keep_shown(config, old, had={f"{kind.secret_map}.{k}" for k in stored})
    _keep_settings(config, old, kind.kept_on_update)
    disable = entry.is_shell_command and tool.status == ToolStatus.ENABLED
    return UpdatePlan(tool=tool, entry=entry, config=config, disable=disable, rows=_diff(tool.type, old, config))


def tool_market_update_preview(*, tenant: Tenant, actor: Any, tool_id: Any, env: dict[str, str] | None = None,
                               headers: dict[str, str] | None = None) -> UpdatePlan:
    """What `tool_market_update` would change, row by row, for an admin to confirm; writes nothing.

    Refuses exactly as the update would (no update available, entry removed, values missing)."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    tool = tool_selectors.tool_get(tenant=tenant, tool_id=tool_id)
    return _update_plan(tenant=tenant, tool=tool, env=env, headers=headers)


@transaction.atomic
def tool_market_update(*, tenant: Tenant, actor: Any, tool_id: Any, env: dict[str, str] | None = None,
                       headers: dict[str, str] | None = None) -> Loaded:
    """Apply the newer entry's install, keeping the user's values for variables still declared."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    tool = tool_selectors.tool_get_for_update(tenant=tenant, tool_id=tool_id)
    plan = _update_plan(tenant=tenant, tool=tool, env=env, headers=headers)
    tool = tool_update(tenant=tenant, actor=actor, tool_id=tool.pk,
                       changes=ToolInput(config=plan.config, status=ToolStatus.DISABLED if plan.disable else None))
    Tool.objects.filter(pk=tool.pk, tenant=tenant).update(market_hash=plan.entry.content_hash)
    tool.refresh_from_db()
    return Loaded(tool, SHELL_MESSAGE if plan.disable else "")
