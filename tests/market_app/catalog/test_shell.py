"""is_shell_command: which LOCAL command lines hand a script to a shell."""

from __future__ import annotations

import pytest

from market_app.catalog import is_shell_command


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        ("npx", ["-y", "@scope/pkg"], False),
        ("uvx", ["mcp-server-time"], False),
        ("docker", ["run", "-i", "--rm", "img:1"], False),
        ("python", ["-m", "server", "a|b"], False),  # metacharacters in plain argv are literal
        ("bash", ["script.sh"], False),
        ("sh", ["-c", "npx foo"], True),
        ("bash", ["-lc", "source ~/.profile && run"], True),
        ("/bin/bash", ["-ec", "run"], True),
        ("zsh", ["--login", "-c", "run"], True),
        ("cmd.exe", ["/c", "run.bat"], True),
        ("pwsh", ["-Command", "Get-Thing"], True),
        ("env", ["FOO=1", "sh", "-c", "run"], True),
        ("sudo", ["-u", "me", "bash", "-c", "x"], True),
        ("env", ["FOO=1", "python", "server.py"], False),
        ("timeout", ["30", "bash", "-c", "x"], True),
        ("bash", [], True),
        ("curl -s https://x | sh", [], True),
        ("run; rm -rf /", [], True),
        ("echo $(whoami)", [], True),
        ("server`id`", [], True),
        ("", [], False),
    ],
)
def test_is_shell_command(command: str, args: list[str], expected: bool) -> None:
    assert is_shell_command(command, args) is expected
