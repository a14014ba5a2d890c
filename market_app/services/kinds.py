"""The market's install kinds: one strategy per kind (LOCAL, REMOTE), chosen once by `install_kind(entry.kind)`.

Everything that differs between a command line with env variables and a URL with headers lives here: the config
an entry installs, which values an update keeps, the OAuth probe, the rows the admin shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from core.secrets import SECRET_KEY_RE, require_secrets_on_move
from market_app.errors import SecretInArguments
from market_app.models import EntryKind, MarketEntry
from tools_app.configs.auth import Draft, is_oauth_tool
from tools_app.runtime.mcp.oauth import asks_for_oauth
from tools_app.wiring.http import outbound_policy

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]*)\}")


@dataclass
class Values:
    """An entry's variables resolved for one install: env and header values, and which names are secret."""

    env: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    secrets: set[str] = field(default_factory=set)


@dataclass
class Kept:
    """The values an update carries over from the tool as it is (before the user's new ones)."""

    env: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


class InstallKind(Protocol):
    """What differs between the install kinds; `install_kind()` picks the one an entry declares."""

    kind: ClassVar[EntryKind]
    # The config map holding the user's values (secret by default): "env" or "headers".
    secret_map: ClassVar[str]
    # The tool's own settings, which no catalog declares: an update keeps them as the admin set them (sampling,
    # elicitation and roots were reset to their defaults by an update until the diff showed them "removed").
    kept_on_update: ClassVar[tuple[str, ...]]

    def config(self, entry: MarketEntry, values: Values) -> dict[str, Any]:
        """The Tool config the entry installs with these values (before `not_secret` is worked out)."""
        ...

    def with_oauth_if_asked(self, entry: MarketEntry, config: dict[str, Any]) -> dict[str, Any]:
        """The config, marked oauth2 when the server asks for OAuth and nothing else authenticates it."""
        ...

    def kept(self, entry: MarketEntry, old: dict[str, Any], stored: dict[str, str]) -> Kept:
        """The values an update keeps from the tool's config `old` (`stored`: its `secret_map`)."""
        ...

    def carry_over(self, entry: MarketEntry, config: dict[str, Any], *, old: dict[str, Any], stored: dict[str, str],
                   kept: Kept, given_headers: dict[str, str]) -> None:
        """Adjust an update's new config for what the tool had; refuses what may not be carried over."""
        ...

    def summary(self, install: dict[str, Any]) -> list[tuple[str, str]]:
        """The install as (label, value) rows for people: where it runs, and which fixed keys it sets."""
        ...


def substitute(text: str, values: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def refuse_visible_secrets(names: set[str], where: str) -> None:
    if names:
        raise SecretInArguments(
            f"this entry puts secret {', '.join(sorted(names))} into {where}, which Toolhub does not mask; "
            "create the tool by hand with the secret in env or headers instead",
            details={"variables": sorted(names)},
        )


def template_vars(headers: dict[str, str]) -> set[str]:
    """Variables used inside header templates ("Bearer {token}")."""
    return {name for v in headers.values() for name in PLACEHOLDER.findall(v)}


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
        for candidate in _candidates(template, args, index):
            match = pattern.fullmatch(candidate)
            if match:
                found.update({n: v for n, v in zip(names, match.groups(), strict=True) if n not in found})
                break
    return found


def _candidates(template: list[Any], args: list[str], index: int) -> list[str]:
    """The arguments that may hold template argument `index`: the one after the same flag, then the same position."""
    candidates = [args[index]] if index < len(args) else []
    flag = str(template[index - 1]) if index else ""
    if flag.startswith("-") and flag in args:
        at = args.index(flag)
        if at + 1 < len(args):
            candidates.insert(0, args[at + 1])
    return candidates


def _shown(config: dict[str, Any], map_name: str, declared: list[dict[str, Any]]) -> dict[str, Any]:
    """Variables the catalog declares not secret (and whose names do not look secret) are shown, not masked."""
    plain = sorted(f"{map_name}.{v['name']}" for v in declared
                   if v.get("is_secret") is False and not SECRET_KEY_RE.search(v["name"])
                   and v["name"] in config[map_name])
    if plain:
        config["not_secret"] = plain
    return config


def _fixed_keys(label: str, fixed: dict[str, Any]) -> list[tuple[str, str]]:
    return [(label, ", ".join(sorted(str(k) for k in fixed)))] if fixed else []


class LocalInstall:
    """A command line the runner starts (stdio): the user's values are env variables and argument templates."""

    kind: ClassVar[EntryKind] = EntryKind.LOCAL
    secret_map: ClassVar[str] = "env"
    kept_on_update: ClassVar[tuple[str, ...]] = ("cwd", "startup_timeout_s", "call_timeout_s", "version_check",
                                                 "roots", "sampling", "elicitation")

    def config(self, entry: MarketEntry, values: Values) -> dict[str, Any]:
        install = entry.install or {}
        args = [str(a) for a in install.get("args") or []]
        in_args = {name for a in args for name in PLACEHOLDER.findall(a)}
        refuse_visible_secrets(in_args & values.secrets & set(values.env), "command-line arguments")
        # Template variables fill arguments and env templates; they are never env variables themselves.
        template_only = _template_only(entry)
        env_out = {k: substitute(v, values.env) for k, v in (install.get("env") or {}).items()}
        env_out.update({k: v for k, v in values.env.items() if k not in template_only})
        config: dict[str, Any] = {
            "command": install.get("command", ""),
            "args": [substitute(a, values.env) for a in args],
            "env": env_out,
        }
        if install.get("cwd"):
            config["cwd"] = install["cwd"]
        return _shown(config, "env", entry.required_env)

    def with_oauth_if_asked(self, entry: MarketEntry, config: dict[str, Any]) -> dict[str, Any]:
        return config  # a local process has no authorization server

    def kept(self, entry: MarketEntry, old: dict[str, Any], stored: dict[str, str]) -> Kept:
        env_names = {v["name"] for v in entry.required_env}
        env = {k: v for k, v in stored.items() if k in env_names}
        # Values of argument variables live in the tool's arguments: read them back from there.
        recovered = recover_template_values((entry.install or {}).get("args") or [], old.get("args") or [])
        template_only = _template_only(entry)
        env.update({k: v for k, v in recovered.items() if k in template_only and k not in env})
        return Kept(env=env)

    def carry_over(self, entry: MarketEntry, config: dict[str, Any], *, old: dict[str, Any], stored: dict[str, str],
                   kept: Kept, given_headers: dict[str, str]) -> None:
        # Values of undeclared keys the install itself lists (and the user may have changed) stay the user's.
        env_names = {v["name"] for v in entry.required_env}
        config["env"].update({k: v for k, v in stored.items() if k in config["env"] and k not in env_names})

    def summary(self, install: dict[str, Any]) -> list[tuple[str, str]]:
        args = " ".join(str(a) for a in install.get("args") or [])
        rows = [("Command", f"{install.get('command') or ''} {args}".strip() or "-")]
        if install.get("cwd"):
            rows.append(("Working directory", str(install["cwd"])))
        return rows + _fixed_keys("Environment", install.get("env") or {})


def _template_only(entry: MarketEntry) -> set[str]:
    return {v["name"] for v in entry.required_env if v.get("template_only")}


class RemoteInstall:
    """A URL Toolhub connects to (streamable HTTP or SSE): the user's values are headers and URL variables."""

    kind: ClassVar[EntryKind] = EntryKind.REMOTE
    secret_map: ClassVar[str] = "headers"
    kept_on_update: ClassVar[tuple[str, ...]] = ("timeout_s", "sampling", "elicitation")

    def config(self, entry: MarketEntry, values: Values) -> dict[str, Any]:
        install = entry.install or {}
        base_headers = dict(install.get("headers") or {})
        url = str(install.get("url", ""))
        refuse_visible_secrets(set(PLACEHOLDER.findall(url)) & values.secrets & set(values.env), "the URL")
        pool = {**values.env, **values.headers}
        template_only = template_vars(base_headers) - set(base_headers)
        names = [*base_headers, *(k for k in values.headers if k not in base_headers and k not in template_only)]
        return _shown({
            "url": substitute(url, values.env),
            "transport": install.get("transport", "streamable_http"),
            "headers": {k: substitute(str(values.headers.get(k, base_headers.get(k, ""))), pool) for k in names},
        }, "headers", entry.required_headers)

    def with_oauth_if_asked(self, entry: MarketEntry, config: dict[str, Any]) -> dict[str, Any]:
        """A remote that declares no header but answers 401 naming its OAuth metadata (RFC 9728) loads as an oauth2
        tool (190 of the registry's 450 remotes are such servers): one probe of its URL, through the outbound
        guard."""
        if entry.required_headers or config.get("headers") or is_oauth_tool(Draft(config)):
            return config
        if asks_for_oauth(str(config.get("url") or ""), outbound_policy()):
            return {**config, "auth": {"type": "oauth2"}}
        return config

    def kept(self, entry: MarketEntry, old: dict[str, Any], stored: dict[str, str]) -> Kept:
        header_names = {v["name"] for v in entry.required_headers}
        return Kept(headers={k: v for k, v in stored.items() if k in header_names})

    def carry_over(self, entry: MarketEntry, config: dict[str, Any], *, old: dict[str, Any], stored: dict[str, str],
                   kept: Kept, given_headers: dict[str, str]) -> None:
        catalog_headers = dict((entry.install or {}).get("headers") or {})  # the catalog's own values are no secret
        # A catalog that moves the server to another origin does not take the user's headers along.
        require_secrets_on_move(old_url=old.get("url"), new_url=config.get("url"),
                                kept=[f"headers.{k}" for k, v in kept.headers.items()
                                      if v and k not in given_headers and v != catalog_headers.get(k)],
                                field="config.url")

    def summary(self, install: dict[str, Any]) -> list[tuple[str, str]]:
        rows = [("URL", str(install.get("url") or "-")),
                ("Transport", str(install.get("transport") or "streamable_http"))]
        return rows + _fixed_keys("Headers", install.get("headers") or {})


KINDS: dict[str, InstallKind] = {EntryKind.LOCAL: LocalInstall(), EntryKind.REMOTE: RemoteInstall()}


def install_kind(kind: str) -> InstallKind:
    """The strategy for an entry's (or a market tool's) kind."""
    return KINDS[kind]
