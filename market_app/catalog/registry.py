"""Map one official MCP Registry (API v0.1) server record to a catalog entry: packages, remotes, inputs."""

from __future__ import annotations

from typing import Any, Literal

from market_app.catalog.common import looks_secret, placeholders, status_of, text, transport_of
from market_app.catalog.types import EntryData, Kind, RequiredVar

OFFICIAL_META = "io.modelcontextprotocol.registry/official"
SUPPORTED_PACKAGES = ("npm", "pypi", "oci")

Prefer = Literal["remote", "package"]
Mapped = tuple[Kind, dict[str, Any], list[RequiredVar], list[RequiredVar]]  # kind, install, env, headers


def registry_next_cursor(doc: Any) -> str | None:
    metadata = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(metadata, dict):
        return None
    return text(metadata.get("nextCursor") or metadata.get("next_cursor")) or None


def official_meta(item: dict[str, Any], server: dict[str, Any]) -> dict[str, Any]:
    for holder in (item, server):
        meta = holder.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get(OFFICIAL_META), dict):
            return meta[OFFICIAL_META]
    return {}


def parse_registry_server(
    item: dict[str, Any], server: dict[str, Any], name: str, *, prefer: Prefer = "remote"
) -> EntryData:
    """One `servers[]` item as an entry; ValueError says why nothing in it is installable.

    With several ways to run a server, a remote is preferred by default: nothing then runs on Toolhub's
    workers and no package is downloaded. `prefer="package"` picks the first usable package instead.
    The first usable candidate of the preferred group wins; the other group is the fallback.
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
    for what, index, spec in ordered:
        try:
            kind, install, env, headers = _remote(spec) if what == "remote" else _package(spec)
        except ValueError as exc:
            reasons.append(f"{what} #{index}: {exc}")
            continue
        return EntryData.build(
            name=name,
            title=text(server.get("title")) or name,
            description=text(server.get("description")),
            version=text(server.get("version")),
            kind=kind,
            install=install,
            required_env=env,
            required_headers=headers,
            status=status_of(meta.get("status") or server.get("status")),
            updated_at=text(meta.get("updatedAt") or meta.get("updated_at")) or None,
        )
    raise ValueError("no usable package or remote: " + "; ".join(reasons))


def _merge(*groups: list[RequiredVar]) -> list[RequiredVar]:
    seen: dict[str, RequiredVar] = {}
    for group in groups:
        for var in group:
            seen.setdefault(var.name, var)
    return list(seen.values())


def _input_var(name: str, spec: dict[str, Any], value: str = "") -> RequiredVar:
    secret = bool(spec.get("isSecret")) or looks_secret(name)
    return RequiredVar(
        name=name,
        is_secret=secret,
        is_required=bool(spec.get("isRequired")),
        description=text(spec.get("description")),
        default=None if secret else (value or None),
    )


def _variables(spec: dict[str, Any], template: str = "") -> list[RequiredVar]:
    """`variables: {name: input}` of a templated value, plus `{name}`s in the template not declared."""
    declared = spec.get("variables")
    out: list[RequiredVar] = []
    if isinstance(declared, dict):
        for var_name, var_spec in declared.items():
            var_spec = var_spec if isinstance(var_spec, dict) else {}
            out.append(_input_var(str(var_name), var_spec, text(var_spec.get("default"))))
    known = {v.name for v in out}
    out += [RequiredVar(name=p, is_required=True) for p in placeholders(template) if p not in known]
    return out


def _inputs(raw: Any, what: str) -> tuple[dict[str, str], list[RequiredVar]]:
    """environmentVariables / headers: kept non-secret values and the declared variables."""
    if raw is None:
        return {}, []
    if not isinstance(raw, list):
        raise ValueError(f"{what} must be a JSON array")
    kept: dict[str, str] = {}
    declared: list[RequiredVar] = []
    for spec in raw:
        name = text(spec.get("name")) if isinstance(spec, dict) else ""
        if not name:
            raise ValueError(f"{what} has an item without a name")
        value = text(spec.get("value")) or text(spec.get("default"))
        var = _input_var(name, spec, value)
        templated = bool(placeholders(value))
        # A template such as "Bearer {token}" is not itself a secret: keep it, ask for its variables.
        if value and (not var.is_secret or templated):
            kept[name] = value
        declared.append(var)
        declared += _variables(spec, value if templated else "")
    return kept, _merge(declared)


def _arguments(raw: Any, what: str) -> tuple[list[str], list[RequiredVar]]:
    """runtimeArguments / packageArguments as argv, with `{NAME}` placeholders for values to supply."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise ValueError(f"{what} must be a JSON array")
    argv: list[str] = []
    declared: list[RequiredVar] = []
    for index, spec in enumerate(raw):
        if not isinstance(spec, dict):
            raise ValueError(f"{what} #{index} is not a JSON object")
        kind = text(spec.get("type")).lower() or "positional"
        flag = text(spec.get("name"))
        if kind == "named" and not flag:
            raise ValueError(f"{what} #{index} is named but has no name")
        value = text(spec.get("value")) or text(spec.get("default"))
        secret = bool(spec.get("isSecret"))
        required = bool(spec.get("isRequired"))
        if secret or (not value and required):
            var_name = (flag.lstrip("-").upper().replace("-", "_") if kind == "named"
                        else text(spec.get("valueHint")) or f"ARG_{index}")
            declared.append(RequiredVar(name=var_name, is_secret=secret, is_required=True,
                                        description=text(spec.get("description")),
                                        default=None if secret else (value or None)))
            value = "{" + var_name + "}"
        elif not value and kind == "positional":
            continue  # optional and nothing to pass
        declared += _variables(spec)
        if kind == "named":
            argv += [flag, value] if value else [flag]
        else:
            argv.append(value)
    return argv, declared


def _package(pkg: Any) -> Mapped:
    if not isinstance(pkg, dict):
        raise ValueError("not a JSON object")
    rtype = text(pkg.get("registryType") or pkg.get("registry_type")).lower()
    ident = text(pkg.get("identifier") or pkg.get("name"))
    version = text(pkg.get("version"))
    raw_transport = pkg.get("transport")
    transport: dict[str, Any] = raw_transport if isinstance(raw_transport, dict) else {}
    ttype = text(transport.get("type")).lower() or "stdio"
    if ttype != "stdio":
        http = transport_of(ttype)
        url = text(transport.get("url"))
        if http is None:
            raise ValueError(f"transport {ttype!r} is not supported; accepted: stdio, streamable-http, sse")
        if not url:
            raise ValueError(f"{ttype} transport without a url")
        kept, headers = _inputs(transport.get("headers"), "transport headers")
        return "REMOTE", {"url": url, "transport": http, "headers": kept}, _variables(transport, url), headers
    if rtype not in SUPPORTED_PACKAGES:
        raise ValueError(f"registryType {rtype or '(none)'!r} is not supported "
                         f"(supported: {', '.join(SUPPORTED_PACKAGES)})")
    if not ident:
        raise ValueError("package without an identifier")
    env_kept, env_vars = _inputs(pkg.get("environmentVariables"), "environmentVariables")
    runtime_args, runtime_vars = _arguments(pkg.get("runtimeArguments"), "runtimeArguments")
    package_args, package_vars = _arguments(pkg.get("packageArguments"), "packageArguments")
    if rtype == "npm":
        command, head, ref = "npx", ["-y"], f"{ident}@{version}" if version else ident
    elif rtype == "pypi":
        command, head, ref = "uvx", [], f"{ident}=={version}" if version else ident
    else:
        tagged = ":" in ident.rsplit("/", 1)[-1] or "@" in ident
        command, head = "docker", ["run", "-i", "--rm"]
        ref = f"{ident}:{version}" if version and not tagged else ident
        # A container sees only the variables named with -e; pass each declared one through.
        passed = {runtime_args[i + 1] for i, a in enumerate(runtime_args[:-1]) if a in ("-e", "--env")}
        for var in env_vars:
            if var.name not in passed and not any(a.startswith(var.name + "=") for a in runtime_args):
                head += ["-e", var.name]
    install = {"command": command, "args": [*head, *runtime_args, ref, *package_args], "env": env_kept}
    return "LOCAL", install, _merge(env_vars, runtime_vars, package_vars), []


def _remote(remote: Any) -> Mapped:
    if not isinstance(remote, dict):
        raise ValueError("not a JSON object")
    rtype = text(remote.get("type") or remote.get("transport_type"))
    transport = transport_of(rtype)
    if transport is None:
        raise ValueError(f"remote type {rtype!r} is not supported; accepted: streamable-http, sse")
    url = text(remote.get("url"))
    if not url:
        raise ValueError("remote without a url")
    kept, headers = _inputs(remote.get("headers"), "headers")
    return "REMOTE", {"url": url, "transport": transport, "headers": kept}, _variables(remote, url), headers
