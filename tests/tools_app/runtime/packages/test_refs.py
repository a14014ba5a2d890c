"""Package runner command lines read into refs, and registries an operator has not allowed refused (no network)."""

from __future__ import annotations

import pytest

from tools_app.runtime.packages import refs, registry
from tools_app.runtime.packages.errors import (
    PackageManagerMissing,
    PackageNotInstallable,
    PackageRegistryRefused,
)


@pytest.mark.parametrize(("command", "args", "expected"), [
    ("npx", ["-y", "@modelcontextprotocol/server-everything"],
     ("npm", "@modelcontextprotocol/server-everything", "", "", ())),
    ("/usr/bin/npx", ["--yes", "@scope/srv@1.2.3", "--root", "/w"], ("npm", "@scope/srv", "1.2.3", "", ("--root", "/w"))),
    ("npx", ["-y", "srv@latest"], ("npm", "srv", "", "", ())),
    ("npx", ["-y", "--package=@scope/tools", "tool-a", "x"], ("npm", "@scope/tools", "", "tool-a", ("x",))),
    ("npm", ["exec", "--yes", "--", "srv@^2", "a"], ("npm", "srv", "^2", "", ("a",))),
    ("bunx", ["srv@2.0.0"], ("npm", "srv", "2.0.0", "", ())),
    ("uvx", ["mcp-server-time", "--local-timezone", "UTC"], ("pypi", "mcp-server-time", "", "", ("--local-timezone", "UTC"))),
    ("uvx", ["mcp_server_Time==2026.10.19"], ("pypi", "mcp-server-time", "==2026.10.19", "", ())),
    ("uvx", ["mcp-server-time@2026.10.19"], ("pypi", "mcp-server-time", "==2026.10.19", "", ())),
    ("uvx", ["--from", "mcp-server-git[x]", "mcp-server-git", "-r", "."], ("pypi", "mcp-server-git[x]", "", "", ("-r", "."))),
    ("pipx", ["run", "--spec", "pkg==1.0", "tool"], ("pypi", "pkg", "==1.0", "tool", ())),
    ("uv", ["tool", "run", "pkg"], ("pypi", "pkg", "", "", ())),
])
def test_runner_lines_name_their_package(command: str, args: list[str], expected: tuple[object, ...]) -> None:
    ref = refs.parse(command, args)
    assert ref is not None
    assert (ref.manager, ref.name, ref.spec, ref.command, ref.args) == expected


@pytest.mark.parametrize(("command", "args"), [("node", ["server.js"]), ("python", ["-m", "x"]),
                                               ("npm", ["start"]), ("pipx", ["install", "x"]), ("uv", ["run", "x"])])
def test_other_commands_are_no_package_runners(command: str, args: list[str]) -> None:
    assert refs.parse(command, args) is None


@pytest.mark.parametrize(("command", "args", "why"), [
    ("npx", ["-y"], "no package"),
    ("npx", ["-c", "echo hi"], "shell command"),
    ("npx", ["-y", "github:someone/server"], "git URL"),
    ("uvx", ["git+https://github.com/a/b"], "git URL"),
    ("uvx", ["--with", "extra", "pkg"], "extra packages"),
    ("npx", ["-y", "Not A Name"], "not an npm package name"),
])
def test_uninstallable_runner_lines_say_why(command: str, args: list[str], why: str) -> None:
    with pytest.raises(PackageNotInstallable) as caught:
        refs.parse(command, args)
    assert why in caught.value.message and "sandbox without network" in caught.value.message


def test_a_registry_the_operator_has_not_allowed_is_refused_before_any_request() -> None:
    regs = registry.Registries(allowed_hosts=("registry.npmjs.org",))
    ref = refs.parse("npx", ["-y", "--registry=https://npm.evil.example/", "srv"])
    assert ref is not None
    with pytest.raises(PackageRegistryRefused) as caught:
        registry.resolve(ref, regs)
    assert "npm.evil.example" in caught.value.message and "TOOLHUB_PACKAGE_REGISTRY_HOSTS" in caught.value.message
    pypi = refs.parse("uvx", ["mcp-server-time"])
    assert pypi is not None
    with pytest.raises(PackageRegistryRefused):
        registry.check_allowed(pypi, regs)  # pypi.org is not on this operator's list
    registry.check_allowed(pypi, registry.Registries(pypi_extra=("/opt/wheels", "file:///opt/pypi/simple")))


def test_a_missing_node_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    ref = refs.parse("npx", ["-y", "srv"])
    assert ref is not None
    with pytest.raises(PackageManagerMissing) as caught:
        registry.need("node", ref)
    assert "apt-get install nodejs npm" in caught.value.message and caught.value.code == "package_manager_missing"


@pytest.mark.parametrize(("command", "args", "exact"), [
    ("npx", ["-y", "srv@1.2.3"], "1.2.3"), ("npx", ["-y", "srv@1.2.3-beta.1"], "1.2.3-beta.1"),
    ("npx", ["-y", "srv@^1.2.3"], ""), ("npx", ["-y", "srv@next"], ""), ("npx", ["-y", "srv"], ""),
    ("uvx", ["pkg==1.2"], "1.2"), ("uvx", ["pkg>=1.2"], ""), ("uvx", ["pkg==1.*"], ""), ("uvx", ["pkg"], ""),
])
def test_exact_pins_are_told_from_ranges(command: str, args: list[str], exact: str) -> None:
    ref = refs.parse(command, args)
    assert ref is not None and refs.exact_version(ref) == exact


def test_a_missing_runner_says_what_to_install() -> None:
    from tools_app.runtime.errors import CommandNotFound
    from tools_app.runtime.mcp.process import resolve_command
    from tools_app.runtime.mcp.spec import LocalSpec

    with pytest.raises(CommandNotFound) as caught:
        resolve_command(LocalSpec(command="uvx", env=(("PATH", "/nonexistent"),)))
    assert "make install" in caught.value.message and caught.value.code == "command_not_found"
