"""Read a LOCAL server's command line as a package runner's (`npx -y @scope/pkg`, `uvx pkg==1.2`, ...) into a ref.

A runner fetches its package at start-up, which a sandbox without network cannot do; Toolhub installs the package
instead (outside the sandbox) and runs the installed entry point with the arguments that followed the package.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tools_app.runtime.packages.errors import PackageNotInstallable

Manager = Literal["npm", "pypi"]

# runner (the command's file name, and a leading sub-command) -> the ecosystem it installs from
NPM_RUNNERS = {("npx",): "npx", ("bunx",): "bunx", ("npm", "exec"): "npm exec", ("pnpm", "dlx"): "pnpm dlx",
               ("yarn", "dlx"): "yarn dlx", ("bun", "x"): "bunx"}
PYPI_RUNNERS = {("uvx",): "uvx", ("uv", "tool", "run"): "uv tool run", ("pipx", "run"): "pipx run"}

# Runner options that take a value in the next argument (when not written `--opt=value`).
NPM_VALUE_OPTS = {"-p", "--package", "--registry", "--cache", "--userconfig", "--workspace", "-w", "--node-options",
                  "--loglevel", "--call", "-c"}
PYPI_VALUE_OPTS = {"--from", "--with", "-w", "--with-requirements", "--with-editable", "--python", "-p",
                   "--index-url", "-i", "--default-index", "--extra-index-url", "--index", "--find-links", "-f",
                   "--spec", "--pip-args", "--cache-dir", "--directory", "--project", "--config-file",
                   "--constraints", "-c", "--overrides", "--build-constraints"}
NPM_REGISTRY_OPTS = {"--registry"}
PYPI_INDEX_OPTS = {"--index-url", "-i", "--default-index", "--extra-index-url", "--index", "--find-links", "-f"}
NPM_NAME = re.compile(r"^(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$", re.IGNORECASE)
EXACT_NPM = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
NPM_SPEC = re.compile(r"^[0-9A-Za-z.^~<>=| *+-]+$")


@dataclass(frozen=True)
class PackageRef:
    """One package a LOCAL server runs from, as its command line names it."""

    manager: Manager
    name: str  # npm: as published (`@scope/name`); PyPI: canonical, extras in brackets (`pkg[a,b]`)
    spec: str = ""  # "" = latest; an exact version, a dist-tag (npm) or a range / specifier set
    command: str = ""  # the executable the package offers to run; "" = the package's own (by its name)
    args: tuple[str, ...] = ()  # the server's arguments (what followed the package)
    registries: tuple[str, ...] = ()  # registry / index URLs the command line itself names
    runner: str = ""  # the runner as written (`npx`, `uvx`, ...), for messages

    @property
    def label(self) -> str:
        if self.manager == "pypi":
            return f"{self.name}{self.spec}"
        return f"{self.name}@{self.spec}" if self.spec else self.name

    @property
    def registry_name(self) -> str:
        return "the npm registry" if self.manager == "npm" else "PyPI"

    @property
    def base_name(self) -> str:
        """The name without a PyPI extras list."""
        return self.name.split("[", 1)[0]

    @property
    def extras(self) -> tuple[str, ...]:
        inner = self.name.partition("[")[2].rstrip("]")
        return tuple(e for e in inner.split(",") if e)


def exact_version(ref: PackageRef) -> str:
    """The one version `ref` pins (`1.2.3` for npm, `==1.2.3` for PyPI), or "" for latest, a tag or a range."""
    if ref.manager == "npm":
        return ref.spec if EXACT_NPM.match(ref.spec) else ""
    spec = ref.spec
    return spec[2:] if spec.startswith("==") and "," not in spec and "*" not in spec else ""


@dataclass
class _Scan:
    options: dict[str, list[str]] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    positional: list[str] = field(default_factory=list)


def runner_of(command: str, args: list[str] | tuple[str, ...]) -> tuple[Manager, str, int] | None:
    """(ecosystem, runner as written, how many leading args belong to the runner's name) for a package runner."""
    base = os.path.basename(command or "")
    for table, manager in ((NPM_RUNNERS, "npm"), (PYPI_RUNNERS, "pypi")):
        for words, label in table.items():
            if base == words[0] and list(args[: len(words) - 1]) == list(words[1:]):
                return manager, label, len(words) - 1  # type: ignore[return-value]
    return None


def is_package_runner(command: str, args: list[str] | tuple[str, ...] = ()) -> bool:
    return runner_of(command, args) is not None


def parse(command: str, args: list[str] | tuple[str, ...]) -> PackageRef | None:
    """The package a runner command line runs, or None when `command` is not a package runner.

    Raises PackageNotInstallable for a runner line Toolhub cannot install from a registry, saying why."""
    found = runner_of(command, args)
    if found is None:
        return None
    manager, runner, skip = found
    rest = [str(a) for a in args[skip:]]
    scan = _scan(rest, NPM_VALUE_OPTS if manager == "npm" else PYPI_VALUE_OPTS)
    if manager == "npm":
        return _npm_ref(runner, scan)
    return _pypi_ref(runner, scan)


def _scan(args: list[str], value_opts: set[str]) -> _Scan:
    """Runner options up to the first positional (the package or command); everything after it is the server's."""
    out = _Scan()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.positional = args[i + 1:]
            return out
        if arg.startswith("-") and len(arg) > 1:
            name, eq, value = arg.partition("=")
            if eq:
                out.options.setdefault(name, []).append(value)
            elif name in value_opts and i + 1 < len(args):
                out.options.setdefault(name, []).append(args[i + 1])
                i += 1
            else:
                out.flags.add(name)
            i += 1
            continue
        out.positional = args[i:]
        return out
    return out


def _refuse(runner: str, what: str, why: str, hint: str) -> PackageNotInstallable:
    return PackageNotInstallable(
        f"{runner} {what}: {why}. LOCAL servers run in a sandbox without network, so Toolhub installs their package "
        f"from a registry first; {hint}",
        details={"runner": runner, "package": what},
    )


def _npm_ref(runner: str, scan: _Scan) -> PackageRef:
    if "-c" in scan.options or "--call" in scan.options:
        raise _refuse(runner, "-c", "a shell command line names no package", "name the package and its arguments")
    packages = scan.options.get("-p", []) + scan.options.get("--package", [])
    if len(packages) > 1:
        raise _refuse(runner, " ".join(packages), "more than one --package", "run one package per tool")
    if not packages and not scan.positional:
        raise _refuse(runner, "(none)", "no package named", "write e.g. `npx -y @scope/server`")
    ref = packages[0] if packages else scan.positional[0]
    command = scan.positional[0] if packages and scan.positional else ""
    args = scan.positional[1:] if scan.positional else []
    name, spec = _split_npm(runner, ref)
    return PackageRef(manager="npm", name=name, spec=spec, command=command if command != name else "",
                      args=tuple(args), registries=tuple(scan.options.get("--registry", [])), runner=runner)


def _split_npm(runner: str, ref: str) -> tuple[str, str]:
    if ref.startswith(("git+", "git:", "github:", "http:", "https:", "file:", ".", "/", "~")) or ref.endswith(".tgz"):
        raise _refuse(runner, ref, "a git URL, tarball or local path is not a registry package",
                      "publish it to a registry, or install it yourself and run it by its path")
    if ref.startswith("npm:"):
        ref = ref[4:]
    at = ref.find("@", 1)
    name, spec = (ref[:at], ref[at + 1:]) if at > 0 else (ref, "")
    if not NPM_NAME.match(name) or (spec and not NPM_SPEC.match(spec)):
        raise _refuse(runner, ref, "not an npm package name (with an optional @version)", "write `@scope/name@1.2.3`")
    return name, ("" if spec == "latest" else spec)


def _pypi_ref(runner: str, scan: _Scan) -> PackageRef:
    if scan.options.get("--with") or scan.options.get("-w") or scan.options.get("--with-requirements") \
            or scan.options.get("--with-editable"):
        raise _refuse(runner, "--with", "extra packages beside the server are not installed by Toolhub",
                      "use a package that depends on what it needs")
    spec_opt = scan.options.get("--from", []) + scan.options.get("--spec", [])
    if not spec_opt and not scan.positional:
        raise _refuse(runner, "(none)", "no package named", "write e.g. `uvx mcp-server-time`")
    ref = spec_opt[0] if spec_opt else scan.positional[0]
    command = scan.positional[0] if spec_opt and scan.positional else ""
    args = scan.positional[1:] if scan.positional else []
    name, spec = _split_pypi(runner, ref)
    registries = tuple(v for opt in PYPI_INDEX_OPTS for v in scan.options.get(opt, []))
    if command == name.split("[", 1)[0]:
        command = ""
    return PackageRef(manager="pypi", name=name, spec=spec, command=command, args=tuple(args),
                      registries=registries, runner=runner)


def _split_pypi(runner: str, ref: str) -> tuple[str, str]:
    if ref.startswith(("git+", "http:", "https:", "file:", ".", "/", "~")) or " @ " in ref:
        raise _refuse(runner, ref, "a git URL, archive or local path is not a registry package",
                      "publish it to a registry, or install it yourself and run it by its path")
    at_version = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)@([A-Za-z0-9.+!_-]+)$", ref)
    if at_version:  # uvx's `pkg@1.2` / `pkg@latest`
        ref = at_version.group(1) if at_version.group(2) == "latest" else f"{at_version.group(1)}=={at_version.group(2)}"
    try:
        req = Requirement(ref)
    except InvalidRequirement:
        raise _refuse(runner, ref, "not a PyPI requirement (a name with an optional ==version)",
                      "write `name` or `name==1.2.3`") from None
    if req.url or req.marker:
        raise _refuse(runner, ref, "a URL or environment marker is not a registry package", "write `name==1.2.3`")
    name: str = canonicalize_name(req.name)
    if req.extras:
        name += "[" + ",".join(sorted(canonicalize_name(e) for e in req.extras)) + "]"
    return name, str(req.specifier)
