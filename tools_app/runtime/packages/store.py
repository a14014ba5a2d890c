"""The package store: one folder per package@version, installed outside the sandbox and mounted read-only in it.

Layout: `<store>/<manager>/<name>/<version>/` (an npm scope's `/` becomes `+`). An install builds a sibling temporary
folder and renames it into place once complete, so a version is either wholly there or absent, a new version
installs beside the one in use, and two installers racing leave one copy. `.toolhub-package.json` in the folder
records what was installed and how it was verified.

- npm: `npm install` of the exact version into the folder, scripts off (no package code runs outside the sandbox),
  keeping `package-lock.json`; every package in the lock must carry its `integrity` hash, which npm checked.
- PyPI: a virtualenv from this Python; pip resolves the exact version (`--dry-run --report`), the resolved files
  are pinned with their sha256 into `requirements.txt`, then installed with `--require-hashes --no-deps`, wheels
  only (building an sdist would run package code outside the sandbox), from those very files (no second look at
  the index).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tools_app.runtime.packages.errors import PackageError, PackageInstallFailed
from tools_app.runtime.packages.refs import PackageRef
from tools_app.runtime.packages.registry import Registries, check_allowed, need

MARKER = ".toolhub-package.json"
OUTPUT_TAIL = 1500
# What the installers may see of Toolhub's environment: their own configuration, proxies, certificates; no secrets.
ENV_PREFIXES = ("PIP_", "NPM_CONFIG_", "npm_config_", "UV_")
ENV_NAMES = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
             "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "XDG_CACHE_HOME",
             "XDG_CONFIG_HOME", "PIP_CONFIG_FILE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",
             "NODE_OPTIONS", "NPM_CONFIG_USERCONFIG")
# Python distributions that carry a node helper they `npm install` into their own folder on first use: in the
# sandbox that folder is read-only and there is no network (and npm's output would land on the server's stdout,
# its MCP channel), so the helper is installed with the package, outside the sandbox, under the npm rules (no
# install scripts, every package verified by its lockfile's integrity). distribution -> helper folders in it.
NODE_HELPERS: dict[str, tuple[str, ...]] = {
    "readabilipy": ("readabilipy/javascript",),  # Readability.js + jsdom, for mcp-server-fetch's HTML extraction
}


@dataclass(frozen=True)
class Installed:
    """One installed package@version: where it lives and what it takes on disk."""

    path: str
    size: int
    digest: str  # sha256 of the lockfile / pinned requirements the install was verified against


def folder(store: str | Path, manager: str, name: str, version: str) -> Path:
    safe = name.replace("/", "+")
    return Path(store) / manager / safe / version


def installed(store: str | Path, manager: str, name: str, version: str) -> Installed | None:
    """The installed copy of name@version in the store, if a complete one is there."""
    path = folder(store, manager, name, version)
    try:
        meta = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return Installed(path=str(path), size=int(meta.get("size") or 0), digest=str(meta.get("digest") or ""))


def install(ref: PackageRef, version: str, *, store: str | Path, registries: Registries,
            timeout_s: float) -> Installed:
    """Install `ref` at exactly `version` into the store (a no-op when it is already there)."""
    done = installed(store, ref.manager, ref.name, version)
    if done is not None:
        return done
    final = folder(store, ref.manager, ref.name, version)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{version}.", suffix=".partial", dir=final.parent))
    try:
        helpers: dict[str, str] = {}
        if ref.manager == "npm":
            digest = _install_npm(ref, version, work, registries, timeout_s)
        else:
            digest, helpers = _install_pypi(ref, version, work, final, registries, timeout_s)
        size = disk_size(work)
        (work / MARKER).write_text(json.dumps({"manager": ref.manager, "name": ref.name, "version": version,
                                               "digest": digest, "size": size, "installed_at": time.time(),
                                               "node_helpers": helpers}))
        _read_only(work)
        try:
            os.rename(work, final)
        except OSError:
            if installed(store, ref.manager, ref.name, version) is None:  # not another installer's win
                raise
    finally:
        if work.exists():
            remove(work)
    result = installed(store, ref.manager, ref.name, version)
    if result is None:
        raise PackageInstallFailed(f"{ref.name}@{version} did not land in the package store at {final}",
                                   details={"package": ref.name, "version": version})
    return result


def remove(path: str | Path) -> None:
    """Delete an installed folder (made read-only at install: write permission comes back first)."""
    root = Path(path)
    if not root.exists():
        return
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            child = os.path.join(dirpath, name)
            if os.path.islink(child):  # a link to a folder (node_modules/.bin and friends): nothing to open up
                continue
            try:
                os.chmod(child, 0o755)
            except OSError:
                pass
    try:
        os.chmod(root, 0o755)
    except OSError:
        pass
    shutil.rmtree(root, ignore_errors=True)


def disk_size(path: str | Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def _read_only(root: Path) -> None:
    """No write bit anywhere: even outside the sandbox's read-only mount a server's uid could not change it."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode & 0o555)
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o555)
    os.chmod(root, 0o555)


def installer_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}


def _run(argv: list[str], *, cwd: Path, timeout_s: float, ref: PackageRef, step: str) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, env=installer_env(), capture_output=True, text=True,
                              timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise PackageInstallFailed(f"installing {ref.label} ({step}) did not finish within {timeout_s:g} s",
                                   details={"package": ref.name, "step": step}) from None
    except OSError as exc:
        raise PackageInstallFailed(f"installing {ref.label} ({step}) could not start {argv[0]}: {exc}",
                                   details={"package": ref.name, "step": step}) from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-OUTPUT_TAIL:]
        raise PackageInstallFailed(f"installing {ref.label} failed ({step}, exit {done.returncode}): {tail}",
                                   details={"package": ref.name, "step": step, "exit": done.returncode})
    return done.stdout


# --- npm ---


def _install_npm(ref: PackageRef, version: str, work: Path, registries: Registries, timeout_s: float) -> str:
    npm = need("npm", ref)
    need("node", ref)
    (work / "package.json").write_text(json.dumps({"name": "toolhub-package", "private": True}))
    _npm_install(npm, work, ref, registries, timeout_s, f"{ref.name}@{version}", "--save-exact")
    return _verified_lock(work / "package-lock.json", ref, f"{ref.name}@{version}")


def _npm_install(npm: str, folder: Path, ref: PackageRef, registries: Registries, timeout_s: float,
                 *packages: str) -> None:
    """`npm install` into `folder` (its package.json's dependencies, plus `packages`): no install scripts, no dev
    dependencies, from the registry the operator allows."""
    _run([npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--omit=dev", "--ignore-scripts",
          "--no-update-notifier", "--loglevel=error", f"--registry={registries.primary(ref)}", *packages],
         cwd=folder, timeout_s=timeout_s, ref=ref, step="npm install")


def _verified_lock(lock_path: Path, ref: PackageRef, what: str) -> str:
    """The sha256 of npm's lockfile, once every package in it carries the integrity hash npm verified."""
    try:
        lock = json.loads(lock_path.read_text())
    except (OSError, ValueError):
        raise PackageInstallFailed(f"npm installed {what} without a package-lock.json",
                                   details={"package": ref.name}) from None
    unchecked = [path for path, meta in (lock.get("packages") or {}).items()
                 if path and not meta.get("link") and not meta.get("integrity")]
    if unchecked:
        raise PackageInstallFailed(
            f"npm's lockfile for {what} has no integrity hash for {', '.join(unchecked[:5])}; "
            "Toolhub installs only what the registry's hashes verified",
            details={"package": ref.name, "unverified": unchecked[:20]})
    return _sha256(lock_path)


# --- PyPI ---


def _install_pypi(ref: PackageRef, version: str, work: Path, final: Path, registries: Registries,
                  timeout_s: float) -> tuple[str, dict[str, str]]:
    # The venv is made at its final path's name: scripts carry their interpreter's absolute path in their shebang.
    python = _venv(work, final, ref, timeout_s)
    index_args = _index_args(ref, registries)
    report = work / ".pip-report.json"
    requirement = f"{ref.name}=={version}"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet",
          "--ignore-installed", "--only-binary", ":all:", *index_args, "--report", str(report), requirement],
         cwd=work, timeout_s=timeout_s, ref=ref, step="pip resolve")
    resolved = json.loads(report.read_text())
    pinned = _pinned_requirements(ref, resolved)
    report.unlink()
    requirements = work / "requirements.txt"
    requirements.write_text(pinned)
    # The install takes the very files the resolve chose, from a page of their links: pip neither fetches the index
    # pages again nor weighs every file of every version on them (thousands for some projects) a second time. Not
    # when an index's URL carries its credentials: the report's file URLs have them stripped, so only the index
    # (as the resolve used it) can fetch them.
    if _credentialed(registries.for_ref(ref)):
        sources = index_args
    else:
        links = work / ".pip-links.html"
        links.write_text(_links_page(resolved))
        sources = ["--no-index", "--find-links", str(links)]
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
          "--require-hashes", "--only-binary", ":all:", "--no-compile", *sources, "-r", str(requirements)],
         cwd=work, timeout_s=timeout_s, ref=ref, step="pip install")
    (work / ".pip-links.html").unlink(missing_ok=True)
    helpers = _node_helpers(ref, work, pinned, registries, timeout_s)
    _compile(python, work, final, timeout_s)
    _relocate(work, final)
    return _sha256(requirements), helpers


def _compile(python: Path, work: Path, final: Path, timeout_s: float) -> None:
    """Byte-compile the installed modules now (compiling imports nothing): the store is read-only to the server, so a
    server could never cache them itself and would compile every module it imports at each start. The files name
    their final path (tracebacks). Best effort: a module that does not compile is compiled (and fails) at import."""
    sites = [str(p) for p in work.glob("lib/python*/site-packages")]
    if not sites:
        return
    try:
        subprocess.run([str(python), "-m", "compileall", "-q", "-j0", "-s", str(work), "-p", str(final), *sites],
                       cwd=work, env=installer_env(), capture_output=True, timeout=timeout_s, check=False,
                       stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return


def _node_helpers(ref: PackageRef, work: Path, pinned: str, registries: Registries,
                  timeout_s: float) -> dict[str, str]:
    """Install the node helpers (NODE_HELPERS) of the distributions just installed: {folder: lockfile sha256}.

    Where this host has no node, nothing is installed: the sandbox (which sees the host's /usr) has none either, and
    such a package runs its pure-Python fallback."""
    from packaging.utils import canonicalize_name

    names = {canonicalize_name(line.split("==", 1)[0]) for line in pinned.splitlines() if "==" in line}
    wanted = [(dist, rel) for dist, rels in NODE_HELPERS.items() if canonicalize_name(dist) in names for rel in rels]
    if not wanted:
        return {}
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        return {}
    out: dict[str, str] = {}
    for dist, rel in wanted:
        for site in sorted(work.glob("lib/python*/site-packages")):
            folder = site / rel
            if not (folder / "package.json").is_file():
                continue
            helper = PackageRef(manager="npm", name=f"{rel} (the node helper of {dist}, for {ref.base_name})",
                                runner=ref.runner)
            check_allowed(helper, registries)
            _npm_install(npm, folder, helper, registries, timeout_s)
            out[rel] = _verified_lock(folder / "package-lock.json", helper, helper.name)
    return out


def _venv(work: Path, final: Path, ref: PackageRef, timeout_s: float) -> Path:
    _run([sys.executable, "-m", "venv", "--without-pip", str(work)], cwd=work.parent, timeout_s=timeout_s, ref=ref,
         step="create virtualenv")
    return work / "bin" / "python"


def _relocate(work: Path, final: Path) -> None:
    """Point the scripts' shebangs and the venv's own paths at the folder's final name."""
    old, new = str(work), str(final)
    for path in [*(work / "bin").iterdir(), work / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if old in text:
            path.write_text(text.replace(old, new))


def _index_args(ref: PackageRef, registries: Registries) -> list[str]:
    """Index options only when the command line names its own; otherwise pip's configuration applies as it is."""
    if not ref.registries:
        return []
    first, *rest = ref.registries
    out = ["--index-url", first]
    for url in rest:
        out += ["--extra-index-url", url]
    return out


def _pinned_requirements(ref: PackageRef, report: dict[str, Any]) -> str:
    lines = []
    for item in report.get("install") or []:
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        digest = hashes.get("sha256")
        url = str(info.get("url") or "")
        if not digest and url.startswith("file://"):
            digest = _sha256(Path(url[len("file://"):]))
        if not digest:
            raise PackageInstallFailed(
                f"the index offered {meta.get('name')} {meta.get('version')} for {ref.label} without a sha256 hash; "
                "Toolhub installs only files it can verify",
                details={"package": ref.name, "file": url.rsplit("/", 1)[-1]})
        lines.append(f"{meta['name']}=={meta['version']} --hash=sha256:{digest}")
    if not lines:
        raise PackageInstallFailed(f"pip resolved nothing to install for {ref.label}", details={"package": ref.name})
    return "\n".join(sorted(lines)) + "\n"


def _credentialed(urls: tuple[str, ...]) -> bool:
    """Whether an index URL names a user (`https://user:token@host/simple`): pip's report strips it from file URLs."""
    return any(urlsplit(url).username for url in urls)


def _links_page(report: dict[str, Any]) -> str:
    """A find-links page naming each file of the resolve's report by its URL (its sha256 beside it, which
    `--require-hashes` checks against the pinned requirement anyway)."""
    from html import escape

    anchors = []
    for item in report.get("install") or []:
        info = item.get("download_info") or {}
        url = str(info.get("url") or "").split("#", 1)[0]
        if not url:
            continue
        digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        href = f"{url}#sha256={digest}" if digest else url
        anchors.append(f'<a href="{escape(href)}">{escape(url.rsplit("/", 1)[-1])}</a>')
    return "<!DOCTYPE html>\n<html><body>\n" + "\n".join(anchors) + "\n</body></html>\n"


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- the entry point ---


# Servers that keep their state beside their own code unless told otherwise: in the store that folder is read-only
# (and shared by every tenant, so it must stay so); the variable points it into the server's working folder (the
# tenant workspace) unless the tool sets it. (manager, name) -> {variable: file name}.
STATE_FILES: dict[tuple[str, str], dict[str, str]] = {
    ("npm", "@modelcontextprotocol/server-memory"): {"MEMORY_FILE_PATH": "memory.jsonl"},
}


def state_env(ref: PackageRef, workdir: str, env: dict[str, str]) -> dict[str, str]:
    """The variables that point a server's state into `workdir`, for those `env` does not set already."""
    wanted = STATE_FILES.get((ref.manager, ref.base_name), {})
    return {name: os.path.join(workdir, file) for name, file in wanted.items() if name not in env}


@dataclass(frozen=True)
class Entry:
    """How to start an installed package's server: the program and the arguments before the server's own."""

    command: str
    args: tuple[str, ...] = ()


def entry_point(ref: PackageRef, path: str | Path) -> Entry:
    """The executable `ref` runs from its installed folder (its `command`, else the package's own)."""
    root = Path(path)
    if ref.manager == "npm":
        return _npm_entry(ref, root)
    return _pypi_entry(ref, root)


def _npm_entry(ref: PackageRef, root: Path) -> Entry:
    pkg_dir = root / "node_modules" / ref.name
    try:
        meta = json.loads((pkg_dir / "package.json").read_text())
    except (OSError, ValueError):
        raise PackageInstallFailed(f"{ref.name} is not in its store folder {root}", details={"package": ref.name}) \
            from None
    bins = meta.get("bin")
    unscoped = ref.name.rsplit("/", 1)[-1]
    if isinstance(bins, str):
        bins = {unscoped: bins}
    bins = bins if isinstance(bins, dict) else {}
    wanted = ref.command
    if wanted:
        target = bins.get(wanted)
    elif len(bins) == 1:
        target = next(iter(bins.values()))
    else:
        target = bins.get(unscoped)
    if not target:
        offered = ", ".join(sorted(bins)) or "none"
        raise PackageError(
            f"{ref.name} offers no executable {wanted or unscoped!r} (it offers: {offered}); name one with "
            f"`{ref.runner} --package {ref.name} <executable>`",
            details={"package": ref.name, "offered": sorted(bins)})
    script = (pkg_dir / target).resolve()
    try:
        with open(script, "rb") as fh:
            first = fh.readline(200)
    except OSError:
        raise PackageInstallFailed(f"{ref.name}'s executable {target!r} is missing", details={"package": ref.name}) \
            from None
    if first.startswith(b"#!") and b"node" not in first:
        return Entry(command=str(script))
    return Entry(command=need("node", ref), args=(str(script),))


def _pypi_entry(ref: PackageRef, root: Path) -> Entry:
    name = ref.command or ref.base_name
    script = root / "bin" / name
    if script.is_file():
        return Entry(command=str(script))
    scripts = _console_scripts(ref, root)
    if not ref.command and len(scripts) == 1:
        return Entry(command=str(root / "bin" / scripts[0]))
    raise PackageError(
        f"{ref.base_name} offers no command {name!r} (it offers: {', '.join(scripts) or 'none'}); name one with "
        f"`uvx --from {ref.base_name} <command>`",
        details={"package": ref.base_name, "offered": scripts})


def _console_scripts(ref: PackageRef, root: Path) -> list[str]:
    from packaging.utils import canonicalize_name

    for info in root.glob("lib/python*/site-packages/*.dist-info"):
        dist = info.name.rsplit("-", 1)[0]
        if canonicalize_name(dist) != ref.base_name:
            continue
        names = []
        section = ""
        try:
            lines = (info / "entry_points.txt").read_text().splitlines()
        except OSError:
            return []
        for line in lines:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]").strip()
            elif section == "console_scripts" and "=" in line:
                names.append(line.split("=", 1)[0].strip())
        return sorted(names)
    return []
