"""Load market entries into a tenant as tools, and bring loaded tools up to a newer entry."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.errors import DomainError
from core.secrets import SECRET_KEY_RE, require_secrets_on_move
from core.urls import same_origin
from market_app import selectors
from market_app.catalog import suggest_tool_name
from market_app.catalog.common import unique_name
from market_app.errors import (
    EntryRemoved,
    MissingVariables,
    NoUpdateAvailable,
    SecretInArguments,
    UnknownVariables,
)
from market_app.models import EntryKind, EntryStatus, MarketEntry
from tenants_app.models import Role, Tenant
from tenants_app.permissions import ensure_role
from tools_app import selectors as tool_selectors
from tools_app.configs import mask_config, validate_config
from tools_app.errors import InvalidConfig, NameTaken
from tools_app.models import Tool, ToolStatus
from tools_app.runtime.mcp.oauth import asks_for_oauth
from tools_app.services import ToolInput, screening, tool_create, tool_update
from tools_app.wiring.http import outbound_policy

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
SHELL_MESSAGE = (
    "This entry runs a shell command line, which can do anything on the worker: the tool was created "
    "DISABLED. Review its command and arguments, then enable it."
)
# Operational settings a user may have tuned; a market update keeps them.
# The tool's own settings, which no catalog declares: an update keeps them as the admin set them (sampling,
# elicitation and roots were reset to their defaults by an update until the diff showed them "removed").
KEPT_ON_UPDATE = {EntryKind.LOCAL: ("cwd", "startup_timeout_s", "call_timeout_s", "version_check", "roots",
                                    "sampling", "elicitation"),
                  EntryKind.REMOTE: ("timeout_s", "sampling", "elicitation")}
MAX_BATCH = 100


@dataclass
class Loaded:
    tool: Tool
    message: str = ""


def _substitute(text: str, values: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


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


def build_config(entry: MarketEntry, *, env: dict[str, str], headers: dict[str, str]) -> dict[str, Any]:
    """The Tool config an entry installs with these values; MissingVariables/UnknownVariables name names."""
    install = entry.install or {}
    base_env = dict(install.get("env") or {})
    base_headers = dict(install.get("headers") or {})
    env_values, env_missing = _resolve(entry.required_env, env, base_env, "env")
    header_values, header_missing = _resolve(entry.required_headers, headers, base_headers, "headers")
    if env_missing or header_missing:
        parts = [f"{what} {', '.join(names)}" for what, names in (("env", env_missing), ("headers", header_missing))
                 if names]
        raise MissingVariables(
            f"values required for {'; '.join(parts)} (send them in \"env\" / \"headers\")",
            details={"env": env_missing, "headers": header_missing},
        )
    secrets = {v["name"] for v in [*entry.required_env, *entry.required_headers] if v.get("is_secret")}
    if entry.kind == EntryKind.LOCAL:
        args = [str(a) for a in install.get("args") or []]
        in_args = {name for a in args for name in PLACEHOLDER.findall(a)}
        _refuse_visible_secrets(in_args & secrets & set(env_values), "command-line arguments")
        # Template variables fill arguments and env templates; they are never env variables themselves.
        template_only = {v["name"] for v in entry.required_env if v.get("template_only")}
        env_out = {k: _substitute(v, env_values) for k, v in base_env.items()}
        env_out.update({k: v for k, v in env_values.items() if k not in template_only})
        config: dict[str, Any] = {
            "command": install.get("command", ""),
            "args": [_substitute(a, env_values) for a in args],
            "env": env_out,
        }
        if install.get("cwd"):
            config["cwd"] = install["cwd"]
        return _shown(config, "env", entry.required_env)
    url = str(install.get("url", ""))
    _refuse_visible_secrets(set(PLACEHOLDER.findall(url)) & secrets & set(env_values), "the URL")
    pool = {**env_values, **header_values}
    template_only = _template_vars(base_headers) - set(base_headers)
    names = [*base_headers, *(k for k in header_values if k not in base_headers and k not in template_only)]
    return _shown({
        "url": _substitute(url, env_values),
        "transport": install.get("transport", "streamable_http"),
        "headers": {k: _substitute(str(header_values.get(k, base_headers.get(k, ""))), pool) for k in names},
    }, "headers", entry.required_headers)


def _shown(config: dict[str, Any], map_name: str, declared: list[dict[str, Any]]) -> dict[str, Any]:
    """Variables the catalog declares not secret (and whose names do not look secret) are shown, not masked."""
    plain = sorted(f"{map_name}.{v['name']}" for v in declared
                   if v.get("is_secret") is False and not SECRET_KEY_RE.search(v["name"])
                   and v["name"] in config[map_name])
    if plain:
        config["not_secret"] = plain
    return config


def recover_template_values(template: list[Any], args: list[Any]) -> dict[str, str]:
    """Values of `{NAME}` placeholders of an argument template found in a tool's current arguments.

    An argument is matched at the same position or, for a flag's value, after the same flag.
    """
    found: dict[str, str] = {}
    args = [str(a) for a in args]
    for index, raw in enumerate(str(t) for t in template):
        names = PLACEHOLDER.findall(raw)
        if not names:
            continue
        literals = PLACEHOLDER.split(raw)[::2]  # split() interleaves literal text and the captured names
        pattern = re.compile("(.*)".join(re.escape(part) for part in literals), re.S)
        candidates = [args[index]] if index < len(args) else []
        flag = str(template[index - 1]) if index else ""
        if flag.startswith("-") and flag in args:
            at = args.index(flag)
            if at + 1 < len(args):
                candidates.insert(0, args[at + 1])
        for candidate in candidates:
            match = pattern.fullmatch(candidate)
            if match:
                found.update({n: v for n, v in zip(names, match.groups(), strict=True) if n not in found})
                break
    return found


def _template_vars(headers: dict[str, str]) -> set[str]:
    """Variables used inside header templates ("Bearer {token}")."""
    return {name for v in headers.values() for name in PLACEHOLDER.findall(v)}


def _refuse_visible_secrets(names: set[str], where: str) -> None:
    if names:
        raise SecretInArguments(
            f"this entry puts secret {', '.join(sorted(names))} into {where}, which Toolhub does not mask; "
            "create the tool by hand with the secret in env or headers instead",
            details={"variables": sorted(names)},
        )


def _with_oauth_if_asked(entry: MarketEntry, config: dict[str, Any]) -> dict[str, Any]:
    """A remote that declares no header but answers 401 naming its OAuth metadata (RFC 9728) loads as an oauth2
    tool (190 of the registry's 450 remotes are such servers): one probe of its URL, through the outbound guard."""
    if entry.kind != EntryKind.REMOTE or entry.required_headers or config.get("headers") or config.get("auth"):
        return config
    if asks_for_oauth(str(config.get("url") or ""), outbound_policy()):
        return {**config, "auth": {"type": "oauth2"}}
    return config


def entry_load(*, tenant: Tenant, actor: Any, entry_id: Any, name: str | None = None,
               env: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Loaded:
    """Create a LOCAL/REMOTE tool from a visible entry; shell one-liners are created DISABLED."""
    ensure_role(tenant=tenant, user=actor, at_least=Role.ADMIN)
    entry = selectors.entry_get(tenant=tenant, entry_id=entry_id)
    if entry.status == EntryStatus.REMOVED:
        raise EntryRemoved(f"{entry.name!r} was removed from its catalog and cannot be loaded",
                           details={"entry_id": entry.pk})
    config = _with_oauth_if_asked(entry, build_config(entry, env=env or {}, headers=headers or {}))
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


def _update_plan(*, tenant: Tenant, tool: Tool, env: dict[str, str] | None,
                 headers: dict[str, str] | None) -> UpdatePlan:
    entry = tool.market_entry
    if entry is None:
        raise NoUpdateAvailable("this tool was not loaded from the market")
    if entry.status == EntryStatus.REMOVED:
        raise EntryRemoved(f"{entry.name!r} was removed from its catalog; there is nothing to update to",
                           details={"entry_id": entry.pk})
    if entry.content_hash == tool.market_hash:
        raise NoUpdateAvailable(f"the tool already has the current version of {entry.name!r}")
    old = tool.config or {}
    secret_map = "env" if tool.type == EntryKind.LOCAL else "headers"
    stored: dict[str, str] = dict(old.get(secret_map) or {})
    env_names = {v["name"] for v in entry.required_env}
    header_names = {v["name"] for v in entry.required_headers}
    kept_env = {k: v for k, v in stored.items() if k in env_names} if secret_map == "env" else {}
    if tool.type == EntryKind.LOCAL:
        # Values of argument variables live in the tool's arguments: read them back from there.
        recovered = recover_template_values(entry.install.get("args") or [], old.get("args") or [])
        template_only = {v["name"] for v in entry.required_env if v.get("template_only")}
        kept_env.update({k: v for k, v in recovered.items() if k in template_only and k not in kept_env})
    kept_headers = {k: v for k, v in stored.items() if k in header_names} if secret_map == "headers" else {}
    config = build_config(entry, env={**kept_env, **(env or {})}, headers={**kept_headers, **(headers or {})})
    if secret_map == "env":
        # Values of undeclared keys the install itself lists (and the user may have changed) stay the user's.
        config["env"].update({k: v for k, v in stored.items() if k in config["env"] and k not in env_names})
    if secret_map == "headers":
        catalog_headers = dict((entry.install or {}).get("headers") or {})  # the catalog's own values are no secret
        # A catalog that moves the server to another origin does not take the user's headers along.
        require_secrets_on_move(old_url=old.get("url"), new_url=config.get("url"),
                                kept=[f"headers.{k}" for k, v in kept_headers.items()
                                      if v and k not in (headers or {}) and v != catalog_headers.get(k)],
                                field="config.url")
    # A value the user kept secret stays secret: an update never shows what was masked before. A variable the
    # tool did not have yet is shown as the catalog declares it (a new non-secret variable is not masked).
    was_shown = set(old.get("not_secret") or [])
    had = {f"{secret_map}.{k}" for k in stored}
    shown = [k for k in config.get("not_secret", []) if k in was_shown or k not in had]
    config.pop("not_secret", None)
    if shown:
        config["not_secret"] = shown
    for key in KEPT_ON_UPDATE.get(EntryKind(entry.kind), ()):
        if old.get(key) is not None:
            config.setdefault(key, old[key])
    if old.get("auth") and same_origin(str(old.get("url") or ""), str(config.get("url") or "")):
        # OAuth is the admin's (or the 401 probe's) setting, kept while the server stays where it was: at another
        # origin it is another authorization server, whose client and connections start again.
        config.setdefault("auth", old["auth"])
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
