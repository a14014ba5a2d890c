"""What the sandbox shows: read-only paths inside the system temp folder stay visible over the sandbox's own /tmp."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import scaled
from tools_app.runtime.sandbox import SandboxPolicy, bwrap_argv, check_available, sandbox_env

pytestmark = pytest.mark.skipif(
    not os.access(SandboxPolicy().bwrap, os.X_OK), reason="bubblewrap not installed (apt-get install bubblewrap)"
)


@pytest.fixture
def in_temp() -> Iterator[Path]:
    """A real folder directly in the system temp folder, as a checkout or a mounted runtime would be."""
    with tempfile.TemporaryDirectory(prefix="toolhub-checkout-", dir=tempfile.gettempdir()) as folder:
        os.chmod(folder, 0o755)
        yield Path(folder)


def sandboxed(policy: SandboxPolicy, workspace: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    full = bwrap_argv(policy, bwrap=check_available(policy), workspace=workspace, argv=list(argv),
                      env=sandbox_env(policy, {}))
    return subprocess.run(full, capture_output=True, text=True, timeout=scaled(60), cwd="/")


def test_a_read_only_folder_in_the_temp_folder_is_not_hidden_by_the_sandboxs_tmp(in_temp: Path,
                                                                                 tmp_path: Path) -> None:
    assert str(in_temp).startswith(tempfile.gettempdir() + os.sep)
    (in_temp / "venv" / "bin").mkdir(parents=True)
    (in_temp / "venv" / "bin" / "marker.txt").write_text("the operator's runtime\n")
    (in_temp / "venv" / "bin" / "marker.txt").chmod(0o644)
    (in_temp / "venv").chmod(0o755)
    (in_temp / "venv" / "bin").chmod(0o755)
    workspace = tmp_path / "tenant.1"
    workspace.mkdir()
    workspace.chmod(0o777)
    # A neighbour in the host's temp folder that nobody mounted must stay out of sight.
    with tempfile.NamedTemporaryFile(prefix="toolhub-neighbour-", dir=tempfile.gettempdir()) as neighbour:
        policy = SandboxPolicy(extra_ro_paths=(str(in_temp / "venv"),))
        shown = sandboxed(policy, workspace, "/bin/cat", str(in_temp / "venv" / "bin" / "marker.txt"))
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout == "the operator's runtime\n"
        listing = sandboxed(policy, workspace, "/bin/ls", "-A", "/tmp")
        assert listing.returncode == 0, listing.stderr
        assert os.path.basename(neighbour.name) not in listing.stdout.split()
    # The sandbox's own /tmp is still its private, writable one; the mounted folder is read-only.
    writes = sandboxed(policy, workspace, "/bin/sh", "-c",
                       f"echo mine > /tmp/own && cat /tmp/own && ! echo x > {in_temp / 'venv' / 'bin' / 'new'}")
    assert writes.returncode == 0, writes.stderr
    assert writes.stdout.strip() == "mine"
    assert not (in_temp / "venv" / "bin" / "new").exists()
