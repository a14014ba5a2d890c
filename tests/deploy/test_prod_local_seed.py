"""deploy/prod_local.py's seed: the operator's generated password reaches `add_member` intact.

`secrets.token_urlsafe` may start with "-" (1 run in 64): passed as a separate argument after `--password`, argparse
took it for an option, `add_member` failed (its output is captured), and the topology stopped at `create_token`.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tenants_app.management.commands.add_member import Command as AddMember

REPO = Path(__file__).resolve().parents[2]


def _prod_local() -> Any:
    spec = importlib.util.spec_from_file_location("prod_local_under_test", REPO / "deploy" / "prod_local.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("password", ["-hqt3Ztl6YRcXZl_", "--x", "plain_Pass-1"])
def test_seed_passes_a_password_starting_with_a_dash_to_add_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, password: str
) -> None:
    prod_local = _prod_local()
    monkeypatch.setattr(prod_local, "STATE", tmp_path)
    (tmp_path / "operator-password").write_text(password)
    calls: list[list[str]] = []

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append([str(c) for c in cmd])
        return subprocess.CompletedProcess(cmd, 0, stdout="token-key\n", stderr="")

    monkeypatch.setattr(prod_local.subprocess, "run", run)
    assert prod_local.seed({}) == ("operator", "token-key")
    add = next(c for c in calls if "add_member" in c)
    # The real command's parser, as `manage.py add_member ...` would parse it.
    parsed = AddMember().create_parser("manage.py", "add_member").parse_args(add[add.index("add_member") + 1:])
    assert (parsed.slug, parsed.username, parsed.role, parsed.password) == ("prod", "operator", "owner", password)
