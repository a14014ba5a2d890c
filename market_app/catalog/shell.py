"""Tell whether a LOCAL command line would be interpreted by a shell (a one-liner to review with care)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath, PureWindowsPath

from tools_app.client_config import SHELL_SYNTAX

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox",
                    "cmd", "cmd.exe", "powershell", "powershell.exe", "pwsh", "pwsh.exe"})
# Flags that make a shell run its next argument as a script.
INLINE_FLAGS = frozenset({"-c", "-lc", "-ic", "-cl", "/c", "/k", "-command", "-c:", "-encodedcommand", "-e"})
# Programs that just run the rest of their arguments as another command.
WRAPPERS = frozenset({"env", "nohup", "sudo", "doas", "exec", "nice", "stdbuf", "timeout", "xargs"})
# Shell syntax: sequencing, pipes, substitution, redirection, globbing of paths.
# Shell syntax is one rule for catalogs and client config files alike.
METACHARS = SHELL_SYNTAX


def _program(token: str) -> str:
    name = PureWindowsPath(token).name if "\\" in token else PurePosixPath(token).name
    return name.lower()


def is_shell_command(command: str, args: Sequence[str] | None = None) -> bool:
    """True when `command`/`args` hand a script to a shell, or `command` itself is a shell one-liner.

    Metacharacters inside ordinary arguments are not flagged: without a shell they are literal text.
    """
    if not command:
        return False
    if METACHARS.search(command) or (any(c.isspace() for c in command.strip())):
        return True
    tokens = [command, *[str(a) for a in (args or [])]]
    i = 0
    if _program(tokens[0]) in WRAPPERS:
        # Wrapper options vary (sudo -u USER, timeout 30, env A=1): take the first shell after it.
        i = next((j for j, t in enumerate(tokens) if j and _program(t) in SHELLS), len(tokens))
    if i >= len(tokens) or _program(tokens[i]) not in SHELLS:
        return False
    rest = [t.lower() for t in tokens[i + 1:]]
    if not rest:
        return True  # an interactive shell reading its script from stdin
    return any(t in INLINE_FLAGS or (t.startswith("-") and not t.startswith("--") and "c" in t[1:])
               for t in rest)
