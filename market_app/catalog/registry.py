"""Map one official MCP Registry server record (API v0.1, or the 2025-05 seed format) to a catalog entry.

General rules, for every record of the registry (not special cases of known servers):
- An optional argument with no value and no default is left out; no flag is ever invented. A required
  one becomes a `{NAME}` placeholder the installer must fill.
- Publisher `runtimeArguments` that already hold the runner's own arguments (`run -i --rm`, `-y`) or the
  package reference are not doubled: when they name the package they are the whole command line.
- `runtimeHint` picks the runner within the package's ecosystem (npx, bun, node, uvx, python, pipx,
  docker, podman, dnx).
- A package whose own transport is HTTP (it starts a listener) is refused with the reason: Toolhub runs
  packages over stdio only (`HttpListenerPackage`, code `http_listener_package`); a stdio package or a
  remote of the same server is used instead when there is one.
- Variables used in arguments are template variables: they fill the arguments, never the environment.
- A variable or header with a blank name is skipped and reported.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from market_app.catalog.common import looks_secret, placeholders, status_of, text, transport_of
from market_app.catalog.types import EntryData, Kind, RequiredVar
from tools_app.client_config import HttpListenerPackage

OFFICIAL_META = "io.modelcontextprotocol.registry/official"
# registry type -> (default runner, {runtimeHint: runner}); a runner is (command, arguments before the ref).
RUNNERS: dict[str, tuple[tuple[str, list[str]], dict[str, tuple[str, list[str]]]]] = {
    "npm": (("npx", ["-y"]), {"npx": ("npx", ["-y"]), "node": ("npx", ["-y"]), "bun": ("bunx", []),
                              "bunx": ("bunx", []), "pnpm": ("pnpm", ["dlx"]), "yarn": ("yarn", ["dlx"])}),
    "pypi": (("uvx", []), {"uvx": ("uvx", []), "uv": ("uvx", []), "python": ("uvx", []),
                           "pipx": ("pipx", ["run"])}),
    "oci": (("docker", ["run", "-i", "--rm"]), {"docker": ("docker", ["run", "-i", "--rm"]),
                                               "podman": ("podman", ["run", "-i", "--rm"])}),
    "nuget": (("dnx", []), {"dnx": ("dnx", [])}),
}
SUPPORTED_PACKAGES = tuple(RUNNERS)
REGISTRY_ALIASES = {"docker": "oci"}
# Runner switches a publisher often repeats in runtimeArguments.
RUNNER_SWITCHES = {"-y", "--yes", "-i", "--interactive", "--rm"}

Prefer = Literal["remote", "package"]
Mapped = tuple[Kind, dict[str, Any], list[RequiredVar], list[RequiredVar]]  # kind, install, env, headers
SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def registry_next_cursor(doc: Any) -> str | None:
    metadata = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(metadata, dict):
        return None
    return text(metadata.get("nextCursor") or metadata.get("next_cursor")) or None


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def normalize(value: Any, *, names: bool = False) -> Any:
    """The 2025-05 seed format (`registry_name`, `package_name`, `is_required`, ...) in v0.1 spelling.

    Keys of a `variables` map are names chosen by the publisher and are kept as written; `_meta` too.
    """
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        key = str(key)
        if names or key.startswith("_"):
            out[key] = normalize(item) if not key.startswith("_") else item
        else:
            out.setdefault(_camel(key), normalize(item, names=key == "variables"))
    return out


def official_meta(item: dict[str, Any], server: dict[str, Any]) -> dict[str, Any]:
    for holder in (item, server):
        meta = holder.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get(OFFICIAL_META), dict):
            return dict(meta[OFFICIAL_META])
    detail = server.get("versionDetail")  # 2025-05 seed format
    if isinstance(detail, dict):
        return {"isLatest": detail.get("isLatest"), "publishedAt": detail.get("releaseDate")}
    return {}


def server_version(server: dict[str, Any]) -> str:
    detail = server.get("versionDetail")
    return text(server.get("version")) or (text(detail.get("version")) if isinstance(detail, dict) else "")


def semver_key(version: str) -> tuple[Any, ...]:
    """Semantic version order (pre-releases before their release); non-semver versions sort first."""
    match = SEMVER.match(version.strip())
    if not match:
        return (0,)
    major, minor, patch, pre = match.groups()
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in (pre or "").split(".") if p)
    return (1, int(major), int(minor), int(patch), 0 if pre else 1, parts)


def version_rank(item: dict[str, Any], server: dict[str, Any]) -> tuple[Any, ...]:
    """Which of several versions of one server to keep: the registry's `isLatest`, then the highest
    semantic version, then the newest publication. Used when a registry ignores `version=latest`."""
    meta = official_meta(item, server)
    stamp = text(meta.get("publishedAt") or meta.get("updatedAt"))
    flag = meta.get("isLatest")
    latest = 1 if flag is True else -1 if flag is False else 0  # unknown ranks above "not the latest"
    return (latest, semver_key(server_version(server)), stamp)


def not_latest(rank: Any) -> bool:
    """The registry said explicitly that this record is not the server's latest version."""
    return isinstance(rank, tuple) and bool(rank) and rank[0] == -1


def parse_registry_server(
    item: dict[str, Any], server: dict[str, Any], name: str, *, prefer: Prefer = "remote",
    warnings: list[str] | None = None,
) -> EntryData:
    """One `servers[]` item as an entry; ValueError says why nothing in it is installable.

    With several ways to run a server, a remote is preferred by default: nothing then runs on Toolhub's
    workers and no package is downloaded. `prefer="package"` picks the first usable package instead.
    The first usable candidate of the preferred group wins; the other group is the fallback. Skipped
    inputs (blank names) are appended to `warnings`.
    """
    meta = official_meta(item, server)
    packages = server.get("packages") or []
    remotes = server.get("remotes") or []
    if not isinstance(packages, list) or not isinstance(remotes, list):
        raise ValueError("packages and remotes must be JSON arrays")
    candidates = [("remote", i, r) for i, r in enumerate(remotes)]
    pkg_candidates = [("package", i, p) for i, p in enumerate(packages)]
    ordered = candidates + pkg_candidates if prefer == "remote" else pkg_candidates + candidates
    if not ordered:
        raise ValueError("no packages or remotes: nothing to install")
    reasons: list[str] = []
    listeners = 0
    for what, index, spec in ordered:
        skipped: list[str] = []
        try:
            kind, install, env, headers = _remote(spec, skipped) if what == "remote" else _package(spec, skipped)
        except ValueError as exc:
            reasons.append(f"{what} #{index}: {exc}")
            listeners += isinstance(exc, HttpListenerPackage)
            continue
        if warnings is not None:
            warnings += [f"{what} #{index}: {w}" for w in skipped]
        return EntryData.build(
            name=name,
            title=text(server.get("title")) or name,
            description=text(server.get("description")),
            version=server_version(server),
            kind=kind,
            install=install,
            required_env=env,
            required_headers=headers,
            status=status_of(meta.get("status") or server.get("status")),
            updated_at=text(meta.get("updatedAt") or meta.get("updated_at")) or None,
        )
    if listeners == len(reasons):
        # Only HTTP-listener packages: the typed refusal, with every package's reason.
        raise HttpListenerPackage.joined("no usable package or remote: " + "; ".join(reasons))
    raise ValueError("no usable package or remote: " + "; ".join(reasons))


def _merge(*groups: list[RequiredVar]) -> list[RequiredVar]:
    seen: dict[str, RequiredVar] = {}
    for group in groups:
        for var in group:
            if var.name in seen and seen[var.name].template_only and not var.template_only:
                seen[var.name] = var  # also an env variable of its own: it is set in env too
            seen.setdefault(var.name, var)
    return list(seen.values())


def _input_var(name: str, spec: dict[str, Any], value: str = "", *, template_only: bool = False) -> RequiredVar:
    secret = bool(spec.get("isSecret")) or looks_secret(name)
    return RequiredVar(
        name=name,
        is_secret=secret,
        is_required=bool(spec.get("isRequired")),
        description=text(spec.get("description")),
        default=None if secret else (value or None),
        template_only=template_only,
    )


def _variables(spec: dict[str, Any], template: str = "", *, template_only: bool = False,
               secret: bool = False) -> list[RequiredVar]:
    """`variables: {name: input}` of a templated value, plus `{name}`s in the template not declared. The parts of
    a secret value (`Authorization: Bearer {api_key}`, isSecret) are secret too: never shown in clear."""
    declared = spec.get("variables")
    out: list[RequiredVar] = []
    if isinstance(declared, dict):
        for var_name, var_spec in declared.items():
            var_spec = var_spec if isinstance(var_spec, dict) else {}
            if secret:
                var_spec = {**var_spec, "isSecret": True}
            out.append(_input_var(str(var_name), var_spec, text(var_spec.get("default")),
                                  template_only=template_only))
    known = {v.name for v in out}
    out += [RequiredVar(name=p, is_required=True, template_only=template_only, is_secret=secret or looks_secret(p))
            for p in placeholders(template) if p not in known]
    return out


def _inputs(raw: Any, what: str, skipped: list[str]) -> tuple[dict[str, str], list[RequiredVar]]:
    """environmentVariables / headers: kept non-secret values and the declared variables."""
    if raw is None:
        return {}, []
    if not isinstance(raw, list):
        raise ValueError(f"{what} must be a JSON array")
    kept: dict[str, str] = {}
    declared: list[RequiredVar] = []
    for index, spec in enumerate(raw):
        name = text(spec.get("name")) if isinstance(spec, dict) else ""
        if not isinstance(spec, dict) or not name:
            skipped.append(f"{what} #{index} has no name: skipped")
            continue
        value = text(spec.get("value")) or text(spec.get("default"))
        var = _input_var(name, spec, value)
        templated = bool(placeholders(value))
        # A template such as "Bearer {token}" is not itself a secret: keep it, ask for its variables.
        if value and (not var.is_secret or templated):
            kept[name] = value
        declared.append(var)
        declared += _variables(spec, value if templated else "", secret=var.is_secret)
    return kept, _merge(declared)


def _arg_var_name(kind: str, flag: str, spec: dict[str, Any], index: int) -> str:
    if kind == "named":
        return re.sub(r"[^A-Za-z0-9_]+", "_", flag.lstrip("-")).strip("_").upper() or f"ARG_{index}"
    return text(spec.get("valueHint")) or f"ARG_{index}"


def _arguments(raw: Any, what: str, *, as_written: bool = False) -> tuple[list[str], list[RequiredVar]]:
    """runtimeArguments / packageArguments as argv, with `{NAME}` placeholders for values to supply.

    An optional argument with no value and no default is left out (never a bare flag), unless
    `as_written`: then the publisher spelled out the whole command line and a named argument without a
    value is a switch of it (`-i`, `--rm`).
    """
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise ValueError(f"{what} must be a JSON array")
    argv: list[str] = []
    declared: list[RequiredVar] = []
    for index, spec in enumerate(raw):
        if not isinstance(spec, dict):
            raise ValueError(f"{what} #{index} is not a JSON object")
        more_argv, more_declared = _argument(spec, raw, index, what, as_written=as_written)
        argv += more_argv
        declared += more_declared
    return argv, declared


def _argument(spec: dict[str, Any], raw: list[Any], index: int, what: str,
              *, as_written: bool) -> tuple[list[str], list[RequiredVar]]:
    """One argument of `_arguments` as argv words (none for an optional one without a value) and its variables."""
    kind = text(spec.get("type")).lower() or "positional"
    flag = text(spec.get("name"))
    if kind == "named" and not flag:
        raise ValueError(f"{what} #{index} is named but has no name")
    value = text(spec.get("value")) or text(spec.get("default"))
    secret = bool(spec.get("isSecret"))
    required = bool(spec.get("isRequired"))
    declared: list[RequiredVar] = []
    if (secret and (value or required)) or (not value and required):
        var_name = _arg_var_name(kind, flag, spec, index)
        declared.append(RequiredVar(name=var_name, is_secret=secret, is_required=True,
                                    description=text(spec.get("description")),
                                    default=None if secret else (value or None), template_only=True))
        value = "{" + var_name + "}"
    elif not value:
        # Optional and nothing to pass: never invent a flag, unless it is a switch or a runner flag whose value
        # follows.
        keep = kind == "named" and (as_written or _value_follows(flag, raw, index))
        return ([flag] if keep else []), []
    declared += _variables(spec, value, template_only=True)
    return ([flag, value] if kind == "named" else [value]), declared


# Runner flags that take the next argument as their value: a publisher may write `-e` with no value and the
# variable as the next positional argument (`-e`, `TFE_TOKEN`); the flag is then kept, not dropped.
VALUE_FLAGS = {"-e", "--env", "-v", "--volume", "--env-file", "--mount", "-p", "--publish", "-w", "--workdir",
               "--network", "-u", "--user", "--name"}


def _value_follows(flag: str, raw: list[Any], index: int) -> bool:
    """A value-taking runner flag without a value, followed by a positional argument: that argument is its value."""
    if flag not in VALUE_FLAGS or index + 1 >= len(raw) or not isinstance(raw[index + 1], dict):
        return False
    nxt = raw[index + 1]
    return (text(nxt.get("type")).lower() or "positional") == "positional" and bool(
        text(nxt.get("value")) or text(nxt.get("default")))


def _base_ref(ref: str, rtype: str) -> str:
    """A package reference without what publishers spell differently: the `docker.io/` (and `library/`) prefix, a
    `:tag` or `@digest`, an npm `@version`/`@latest`, pip extras `[cli]` and version pins (`==1.2`)."""
    ref = ref.strip().lower()
    if rtype == "oci":
        ref = ref.split("@", 1)[0]
        name, _, tag = ref.rpartition(":")
        if name and "/" not in tag:
            ref = name
        for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
            ref = ref.removeprefix(prefix)
        return ref.removeprefix("library/")
    if rtype in ("npm", "nuget"):
        at = ref.rfind("@")
        return ref[:at] if at > 0 else ref
    if rtype == "pypi":
        return re.split(r"[\[=<>!~ ;]", ref, maxsplit=1)[0]
    return ref


def _is_ref(value: str, base: str, rtype: str) -> bool:
    return bool(value) and _base_ref(value, rtype) == base


def _mentions(raw: Any, base: str, rtype: str) -> bool:
    """Whether any argument value of `raw` is the package reference, however spelt (the publisher wrote the
    command line)."""
    if not isinstance(raw, list):
        return False
    return any(isinstance(s, dict) and _is_ref(text(s.get("value")), base, rtype) for s in raw)


def _reference(rtype: str, ident: str, version: str) -> str:
    """The package reference the runner is given, pinned to `version` unless the identifier already is."""
    if rtype == "npm" or rtype == "nuget":
        return f"{ident}@{version}" if version and not ident.rsplit("/", 1)[-1].count("@") else ident
    if rtype == "pypi":
        return f"{ident}=={version}" if version and "=" not in ident else ident
    tagged = ":" in ident.rsplit("/", 1)[-1] or "@" in ident
    return f"{ident}:{version}" if version and not tagged else ident


def _passed_through(env_vars: list[RequiredVar], line: list[str]) -> list[str]:
    """A container sees only the variables named with -e: `-e NAME` for each declared one the line lacks."""
    passed = {line[i + 1] for i, a in enumerate(line[:-1]) if a in ("-e", "--env")}
    out: list[str] = []
    for var in env_vars:
        if var.name not in passed and not any(a.startswith(var.name + "=") for a in line):
            out += ["-e", var.name]
    return out


def _package_kind(pkg: dict[str, Any], ident: str) -> str:
    """The package's registry type (a runner Toolhub knows); a package that listens on HTTP is refused as such."""
    rtype = text(pkg.get("registryType") or pkg.get("registryName")).lower()
    rtype = REGISTRY_ALIASES.get(rtype, rtype)
    raw_transport = pkg.get("transport")
    transport: dict[str, Any] = raw_transport if isinstance(raw_transport, dict) else {}
    ttype = text(transport.get("type") or pkg.get("transportType")).lower() or "stdio"
    if ttype != "stdio":
        if transport_of(ttype) is None:
            raise ValueError(f"transport {ttype!r} is not supported; accepted: stdio")
        raise HttpListenerPackage(ttype, text(transport.get("url")), ident)
    if rtype not in RUNNERS:
        raise ValueError(f"registryType {rtype or '(none)'!r} is not supported "
                         f"(supported: {', '.join(SUPPORTED_PACKAGES)})")
    if not ident:
        raise ValueError("package without an identifier")
    return rtype


def _as_written(head: list[str], runtime_args: list[str], at: int) -> tuple[list[str], str, list[str]]:
    """The runner line when the publisher wrote the runner's whole argument list, package reference included:
    (the arguments before the reference with the runner's own switches added, the reference, those after it)."""
    ref, before, trailing = runtime_args[at], runtime_args[:at], runtime_args[at + 1:]
    lead = 1 if head[:1] == ["run"] else 0
    if lead and before[:1] != ["run"]:
        before.insert(0, "run")
    for switch in reversed(head[lead:]):
        twins = {"-i": "--interactive", "-y": "--yes"}
        if switch not in before and twins.get(switch) not in before:
            before.insert(lead, switch)
    return before, ref, trailing


def _package(pkg: Any, skipped: list[str]) -> Mapped:
    if not isinstance(pkg, dict):
        raise ValueError("not a JSON object")
    ident = text(pkg.get("identifier") or pkg.get("packageName") or pkg.get("name"))
    rtype = _package_kind(pkg, ident)
    default_runner, hinted = RUNNERS[rtype]
    command, head = hinted.get(text(pkg.get("runtimeHint")).lower(), default_runner)
    head = list(head)
    ref = _reference(rtype, ident, text(pkg.get("version")))
    env_kept, env_vars = _inputs(pkg.get("environmentVariables"), "environmentVariables", skipped)
    raw_runtime = pkg.get("runtimeArguments")
    base = _base_ref(ident, rtype)
    as_written = _mentions(raw_runtime, base, rtype)
    runtime_args, runtime_vars = _arguments(raw_runtime, "runtimeArguments", as_written=as_written)
    package_args, package_vars = _arguments(pkg.get("packageArguments"), "packageArguments")
    at = next((i for i, a in enumerate(runtime_args) if _is_ref(a, base, rtype)), None) if as_written else None
    trailing: list[str] = []
    if at is not None:
        head, ref, trailing = _as_written(head, runtime_args, at)
        runtime_args = []
    else:
        # Drop what the runner line already holds: `run`, its switches, the package itself.
        dupes = set(head) & RUNNER_SWITCHES | {ident, ref}
        runtime_args = [a for a in runtime_args if a not in dupes and not _is_ref(a, base, rtype)]
        if head[:1] == ["run"] and runtime_args[:1] == ["run"]:
            runtime_args = runtime_args[1:]
    if command in ("docker", "podman"):
        head += _passed_through(env_vars, [*head, *runtime_args])
    tail = [*trailing, *package_args]
    if command == "dnx":
        tail = ["--yes", *(["--", *tail] if tail else [])]
    install = {"command": command, "args": [*head, *runtime_args, ref, *tail], "env": env_kept}
    return "LOCAL", install, _merge(env_vars, runtime_vars, package_vars), []


def _remote(remote: Any, skipped: list[str]) -> Mapped:
    if not isinstance(remote, dict):
        raise ValueError("not a JSON object")
    rtype = text(remote.get("type") or remote.get("transportType"))
    transport = transport_of(rtype)
    if transport is None:
        raise ValueError(f"remote type {rtype!r} is not supported; accepted: streamable-http, sse")
    url = text(remote.get("url"))
    if not url:
        raise ValueError("remote without a url")
    kept, headers = _inputs(remote.get("headers"), "headers", skipped)
    return "REMOTE", {"url": url, "transport": transport, "headers": kept}, _variables(remote, url), headers
