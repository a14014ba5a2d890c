"""Which registries an install uses and may use, and what version a package ref resolves to there.

The npm registry is npm's configured one (`npm config get registry`), PyPI pip's configured index (`pip config`:
index-url, extra-index-url, find-links), unless the command line names its own. Every http(s) registry an install
would contact must be on the operator's list of registry hosts; a `file:` index is local disk and always allowed.
Resolution asks the registry directly (through the outbound guard), so a package or version that does not exist
fails within seconds, naming both.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from html import unescape
from urllib.parse import quote, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from core.errors import RuntimeToolError
from core.outbound import OutboundPolicy, fetch
from tools_app.runtime.packages.errors import (
    PackageError,
    PackageManagerMissing,
    PackageNotFound,
    PackageRegistryRefused,
)
from tools_app.runtime.packages.refs import PackageRef

NPM_DEFAULT = "https://registry.npmjs.org/"
PYPI_DEFAULT = "https://pypi.org/simple/"
# The public registries, allowed unless the operator's list says otherwise (PyPI serves its files from its CDN host).
DEFAULT_HOSTS = ("registry.npmjs.org", "pypi.org", "files.pythonhosted.org")
CONFIG_TIMEOUT_S = 15
MAX_INDEX_BYTES = 32 << 20


@dataclass(frozen=True)
class Registries:
    """The registries installs use, and the hosts an operator allows them to reach."""

    npm: str = NPM_DEFAULT
    pypi_index: str = PYPI_DEFAULT
    pypi_extra: tuple[str, ...] = ()  # extra-index-url and find-links entries (URLs or local folders)
    allowed_hosts: tuple[str, ...] = DEFAULT_HOSTS

    def for_ref(self, ref: PackageRef) -> tuple[str, ...]:
        """Every registry the install of `ref` would contact: the command line's own, else the configured ones."""
        if ref.registries:
            return ref.registries
        return (self.npm,) if ref.manager == "npm" else (self.pypi_index, *self.pypi_extra)

    def primary(self, ref: PackageRef) -> str:
        return self.for_ref(ref)[0]


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CONFIG_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


@functools.cache
def npm_registry() -> str:
    """npm's configured registry (its config files and npm_config_* environment), or the public one."""
    npm = shutil.which("npm")
    found = _run([npm, "config", "get", "registry"]).strip() if npm else ""
    return found if found.startswith(("http://", "https://")) else NPM_DEFAULT


@functools.cache
def pip_indexes() -> tuple[str, tuple[str, ...]]:
    """pip's configured index and its extra indexes and find-links (config files and PIP_* environment)."""
    index, extra = PYPI_DEFAULT, []
    for line in _run([sys.executable, "-m", "pip", "config", "list"]).splitlines():
        key, _, raw = line.partition("=")
        value = raw.strip().strip("'\"")
        option = key.rsplit(".", 1)[-1]
        if option == "index-url" and value:
            index = value
        elif option in ("extra-index-url", "find-links"):
            extra += value.split()
    return index, tuple(dict.fromkeys(extra))


def configured(allowed_hosts: list[str] | tuple[str, ...] = ()) -> Registries:
    """The registries of this host's npm and pip; `allowed_hosts` empty allows the public registries and the hosts
    of pip's configured indexes and npm's configured registry."""
    index, extra = pip_indexes()
    npm = npm_registry()
    hosts = tuple(h.strip().lower() for h in allowed_hosts if h.strip())
    if not hosts:
        hosts = tuple(dict.fromkeys([*DEFAULT_HOSTS, *(host_of(u) for u in (npm, index, *extra) if host_of(u))]))
    return Registries(npm=npm, pypi_index=index, pypi_extra=extra, allowed_hosts=hosts)


def host_of(url: str) -> str:
    parts = urlsplit(url)
    return (parts.hostname or "").lower() if parts.scheme in ("http", "https") else ""


def check_allowed(ref: PackageRef, registries: Registries) -> None:
    """PackageRegistryRefused unless every http(s) registry the install would contact is an allowed host."""
    for url in registries.for_ref(ref):
        parts = urlsplit(url)
        if parts.scheme in ("", "file") and ref.manager == "pypi":
            continue  # a local folder or file index: no network
        host = host_of(url)
        if not host or host not in registries.allowed_hosts:
            raise PackageRegistryRefused(
                f"installing {ref.label} would contact {parts.scheme}://{parts.hostname or url}, which is not a "
                f"registry this platform allows (allowed: {', '.join(registries.allowed_hosts) or 'none'}); a "
                "platform operator can add its host to TOOLHUB_PACKAGE_REGISTRY_HOSTS",
                details={"package": ref.name, "registry": f"{parts.scheme}://{parts.hostname or ''}",
                         "allowed": list(registries.allowed_hosts)},
            )


def resolve(ref: PackageRef, registries: Registries, timeout_s: float = 10.0) -> str:
    """The one version `ref` names at its registry now (`latest` resolved), or PackageNotFound naming both.

    The registry's host is one the operator allowed by name (check_allowed), so its addresses are not checked
    against private ranges: an internal mirror is as much the operator's choice as the public registry."""
    check_allowed(ref, registries)
    policy = OutboundPolicy.build(["0.0.0.0/0", "::/0"], timeout_s=timeout_s)
    if ref.manager == "npm":
        return _resolve_npm(ref, registries.primary(ref), policy)
    return _resolve_pypi(ref, registries, policy)


def _get(url: str, policy: OutboundPolicy, accept: str, ref: PackageRef) -> tuple[int, bytes]:
    try:
        got = fetch("GET", url, policy=policy, headers={"Accept": accept})
    except RuntimeToolError as exc:
        raise PackageError(
            f"could not reach {ref.registry_name} at {host_of(url) or url} to resolve {ref.label}: {exc.message}",
            details={"package": ref.name, "registry": host_of(url)},
        ) from None
    return got.status, got.content


def _resolve_npm(ref: PackageRef, registry: str, policy: OutboundPolicy) -> str:
    base = registry.rstrip("/") + "/" + quote(ref.name, safe="@")
    spec = ref.spec or "latest"
    status, body = _get(f"{base}/{quote(spec, safe='')}", policy, "application/json", ref)
    if status == 200:
        version = str(json.loads(body).get("version") or "")
        if version:
            return version
    elif status not in (404, 405):
        raise _unexpected(ref, registry, status)
    # Not a version or dist-tag the registry answers directly: the package's own document says which exist.
    status, body = _get(base, dataclasses.replace(policy, max_bytes=MAX_INDEX_BYTES),
                        "application/vnd.npm.install-v1+json", ref)
    if status == 404:
        raise _not_found(ref, registry)
    if status != 200:
        raise _unexpected(ref, registry, status)
    doc = json.loads(body)
    versions = list((doc.get("versions") or {}).keys())
    chosen = _npm_range(ref, versions)
    if chosen:
        return chosen
    raise _no_version(ref, registry, versions)


def _npm_range(ref: PackageRef, versions: list[str]) -> str:
    """The highest version matching an npm range (`npm view` decides: npm's own semver rules)."""
    npm = shutil.which("npm")
    if not npm or not versions:
        return ""
    out = _run([npm, "view", f"{ref.name}@{ref.spec}", "version", "--json"]).strip()
    try:
        found = json.loads(out) if out else None
    except ValueError:
        return ""
    if isinstance(found, list):
        found = found[-1] if found else None
    return found if isinstance(found, str) and found in versions else ""


def _resolve_pypi(ref: PackageRef, registries: Registries, policy: OutboundPolicy) -> str:
    index = registries.primary(ref)
    if host_of(index) == "":
        return _pypi_from_pip(ref)
    url = index.rstrip("/") + "/" + ref.base_name + "/"
    status, body = _get(url, dataclasses.replace(policy, max_bytes=MAX_INDEX_BYTES),
                        "application/vnd.pypi.simple.v1+json, text/html;q=0.1", ref)
    if status == 404:
        raise _not_found(ref, index)
    if status != 200:
        raise _unexpected(ref, index, status)
    versions = _simple_versions(ref.base_name, body)
    try:
        wanted = SpecifierSet(ref.spec)
    except InvalidSpecifier:
        raise _no_version(ref, index, [str(v) for v in versions]) from None
    matching = [v for v in versions if v in wanted and (not v.is_prerelease or ref.spec)]
    if not matching:
        raise _no_version(ref, index, [str(v) for v in versions])
    return str(max(matching))


def _simple_versions(name: str, body: bytes) -> list[Version]:
    """Versions with a file on a PEP 691 (JSON) or PEP 503 (HTML) simple index page, yanked files left out."""
    files: list[str] = []
    try:
        doc = json.loads(body)
        files = [f["filename"] for f in doc.get("files", []) if not f.get("yanked")]
    except ValueError:
        html = body.decode("utf-8", errors="replace")
        files = [unescape(m.group(2)) for m in re.finditer(r"<a\b([^>]*)>([^<]+)</a>", html)
                 if "data-yanked" not in m.group(1)]
    out: set[Version] = set()
    for filename in files:
        try:
            if filename.endswith(".whl"):
                out.add(parse_wheel_filename(filename)[1])
            elif filename.endswith((".tar.gz", ".zip")):
                out.add(parse_sdist_filename(filename)[1])
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
    return sorted(out)


def _pypi_from_pip(ref: PackageRef) -> str:
    """A local (file) index: pip itself says what it would install."""
    done = _run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", "--no-deps",
                 "--report", "-", f"{ref.name}{ref.spec}"])
    try:
        items = json.loads(done).get("install") or []
    except ValueError:
        items = []
    if not items:
        raise _not_found(ref, "the configured pip index")
    return str(items[0]["metadata"]["version"])


def _not_found(ref: PackageRef, registry: str) -> PackageNotFound:
    where = host_of(registry) or registry
    return PackageNotFound(
        f"package {ref.base_name!r} does not exist on {ref.registry_name} ({where}); check its spelling in the "
        f"command ({ref.runner} {ref.label})",
        details={"package": ref.base_name, "registry": where, "manager": ref.manager},
    )


def _no_version(ref: PackageRef, registry: str, versions: list[str]) -> PackageNotFound:
    where = host_of(registry) or registry
    recent = versions[-5:]
    return PackageNotFound(
        f"package {ref.base_name!r} on {ref.registry_name} ({where}) has no version matching {ref.spec!r}"
        + (f"; the latest are {', '.join(recent)}" if recent else ""),
        details={"package": ref.base_name, "version": ref.spec, "registry": where, "available": recent},
    )


def _unexpected(ref: PackageRef, registry: str, status: int) -> PackageError:
    return PackageError(
        f"{ref.registry_name} ({host_of(registry) or registry}) answered HTTP {status} for {ref.label}; try again "
        "later, or ask the operator whether the registry is reachable",
        details={"package": ref.base_name, "registry": host_of(registry), "status": status},
    )


def need(program: str, ref: PackageRef) -> str:
    """The absolute path of `program` (node, npm), or PackageManagerMissing saying what to install."""
    found = shutil.which(program)
    if found:
        return found
    raise PackageManagerMissing(
        f"{ref.label} is an npm package and this host has no {program!r}: install Node.js 18 or newer with npm "
        "(Debian/Ubuntu: `apt-get install nodejs npm`; or https://nodejs.org) on every host that installs or runs "
        "LOCAL servers",
        details={"package": ref.name, "missing": program, "install": "apt-get install nodejs npm"},
    )
