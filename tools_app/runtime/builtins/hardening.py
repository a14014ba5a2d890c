"""Per-program hardening for execute_command: git config that would run programs, package scripts.

These apply with or without the OS sandbox: the sandbox bounds what a program can reach, this keeps a
repository or package the tenant wrote from choosing which programs run at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tools_app.runtime.builtins.command_rules import SCRIPT_RUNNING_INSTALLS
from tools_app.runtime.errors import InvalidParams

JS_PACKAGE_MANAGERS = frozenset({"npm", "pnpm", "yarn"})

# Config in the command scope outranks the repository's own, so these neutralise what a repository sets.
GIT_CONFIG_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.sshCommand", "false"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value resets the helper list
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.defaultKeyCommand", "false"),
    ("interactive.diffFilter", "cat"),
    ("protocol.allow", "never"),  # no network protocol (http, https, ssh, git, ext, fd)
    ("protocol.file.allow", "always"),  # local clones/fetches between workspace repositories
)

GIT_ENV: dict[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "GIT_SSH_COMMAND": "false",
    "GIT_ALLOW_PROTOCOL": "file",
    "GIT_NO_REPLACE_OBJECTS": "1",
    # No global config means no user.email: commits fall back to this (a --author still wins for the author).
    "EMAIL": "toolhub-sandbox@localhost",
}

# Repository config naming programs under names we cannot list in advance (driver and remote names).
# Filters are neutralised by an empty override; the rest have no neutral value, so git is refused.
GIT_DRIVER_KEYS_REGEX = (
    r"^(filter\..+\.(clean|smudge|process)|diff\.external|diff\..+\.(textconv|command)|merge\..+\.driver"
    r"|remote\..+\.(uploadpack|receivepack|vcs)|core\.worktree|core\.alternaterefscommand)$"
)

JS_ENV: dict[str, str] = {
    "npm_config_ignore_scripts": "true",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "YARN_IGNORE_SCRIPTS": "true",
    "YARN_ENABLE_SCRIPTS": "false",
}


def git_global_args(args: list[str], subcommand_at: int | None) -> list[str]:
    """The `-C <dir>` options (and --bare) given before the subcommand: they choose the repository."""
    head = args if subcommand_at is None else args[:subcommand_at]
    out: list[str] = []
    for index, arg in enumerate(head):
        if arg == "-C" and index + 1 < len(head):
            out += ["-C", head[index + 1]]
        elif arg == "--bare":
            out.append(arg)
    return out


def git_config_env(extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """GIT_CONFIG_COUNT/KEY/VALUE carrying every override, plus the fixed git environment."""
    pairs = GIT_CONFIG_OVERRIDES + extra
    env = dict(GIT_ENV)
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for index, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def git_driver_overrides(names: list[str]) -> tuple[tuple[str, str], ...]:
    """From the repository's program-naming keys: empty overrides for filters, InvalidParams for the rest."""
    overrides: list[tuple[str, str]] = []
    refused: list[str] = []
    for name in names:
        if name.startswith("filter."):
            overrides.append((name, ""))
            overrides.append((name.rsplit(".", 1)[0] + ".required", "false"))
        else:
            refused.append(name)
    if refused:
        raise InvalidParams(
            f"git: this repository's config sets {', '.join(sorted(set(refused)))}, which runs a program or "
            "points outside the repository (rule: repository config may not choose programs to run); "
            "remove those keys with the file tools first",
            details={"config_keys": sorted(set(refused))},
        )
    return tuple(dict.fromkeys(overrides))


def harden_argv(program: str, argv: list[str], subcommand_at: int | None) -> list[str]:
    """argv with the program's safety options added (`-c core.hooksPath`, `--ignore-scripts`)."""
    if program == "git":
        return [argv[0], "-c", "core.hooksPath=/dev/null", *argv[1:]]
    if program in JS_PACKAGE_MANAGERS and subcommand_at is not None:
        at = subcommand_at + 1  # index in argv (argv[0] is the program)
        if argv[at] in SCRIPT_RUNNING_INSTALLS:
            return [*argv[: at + 1], "--ignore-scripts", *argv[at + 1 :]]
    return argv


def program_env(program: str, workspace: Path, git_extra: tuple[tuple[str, str], ...] = ()) -> Mapping[str, str]:
    """Environment variables the program needs to be safe (added to the scrubbed base)."""
    if program == "git":
        # Never discover a repository above the workspace (the server's own checkout, for one).
        return {**git_config_env(git_extra), "GIT_CEILING_DIRECTORIES": str(workspace.parent)}
    if program in JS_PACKAGE_MANAGERS:
        return JS_ENV
    return {}
