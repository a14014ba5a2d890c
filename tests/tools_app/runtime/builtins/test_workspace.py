"""Workspace confinement: the escape corpus, the symlink race and a Hypothesis property."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools_app.runtime.builtins import BuiltinContext, invoke_builtin
from tools_app.runtime.builtins.workspace import Workspace
from tools_app.runtime.errors import InvalidParams, RuntimeToolError

from .conftest import snapshot

# (id, path template, rule fragment). {outside}, {evil}, {root} are filled in from the layout.
ESCAPES = [
    ("dotdot", "../outside/secret.txt", "outside the workspace"),
    ("dotdot-deep", "sub/../../outside/secret.txt", "outside the workspace"),
    ("absolute-outside", "{outside}/secret.txt", "outside the workspace"),
    ("etc-passwd", "/etc/passwd", "outside the workspace"),
    ("sibling-prefix", "{evil}/secret.txt", "outside the workspace"),
    ("sibling-prefix-relative", "../demo_evil/secret.txt", "outside the workspace"),
    ("symlink-out", "link_out/secret.txt", "outside the workspace"),
    ("symlink-file-out", "file_link", "outside the workspace"),
    ("nul", "hello.txt\x00.png", "NUL"),
]


@pytest.fixture
def escapes(layout: dict[str, Path]) -> dict[str, Path]:
    root = layout["root"]
    (root / "link_out").symlink_to(layout["outside"])
    (root / "file_link").symlink_to(layout["outside"] / "secret.txt")
    return layout


def _fill(template: str, layout: dict[str, Path]) -> str:
    return template.format(outside=layout["outside"], evil=layout["evil"], root=layout["root"])


FILE_TOOLS = [
    ("read_file", {}),
    ("list_directory", {}),
    ("write_file", {"content": "pwned"}),
    ("edit_file", {"content": "pwned"}),
    ("delete_file", {"recursive": True}),
]
# Deleting a link removes the link itself (see test_delete_of_a_symlink_removes_the_link_not_the_target).
ESCAPE_CASES = [
    pytest.param(tool, extra, path, rule, id=f"{tool}-{case}")
    for tool, extra in FILE_TOOLS
    for case, path, rule in ESCAPES
    if not (tool == "delete_file" and case == "symlink-file-out")
]


@pytest.mark.parametrize(("tool", "extra", "path", "rule"), ESCAPE_CASES)
def test_escape_corpus_is_refused_and_changes_nothing(
    ctx: BuiltinContext, escapes: dict[str, Path], tool: str, extra: dict[str, object], path: str, rule: str
) -> None:
    before = {k: snapshot(escapes[k]) for k in ("root", "outside", "evil")}
    result = invoke_builtin(tool, tool, {"path": _fill(path, escapes), **extra}, ctx)
    assert not result.success
    assert result.error_code in ("INVALID_PARAMS", "BUSINESS_ERROR"), result
    assert rule in (result.error or ""), result.error
    assert {k: snapshot(escapes[k]) for k in ("root", "outside", "evil")} == before


def test_delete_of_a_symlink_removes_the_link_not_the_target(
    ctx: BuiltinContext, escapes: dict[str, Path]
) -> None:
    result = invoke_builtin("delete_file", "delete_file", {"path": "file_link"}, ctx)
    assert result.success, result
    assert not (escapes["root"] / "file_link").is_symlink()
    assert (escapes["outside"] / "secret.txt").read_text() == "outside secret\n"


@pytest.mark.parametrize("path", [".git/config", ".git/hooks/pre-commit", "sub/.git/config", ".GIT/config"])
@pytest.mark.parametrize("tool", ["write_file", "edit_file", "delete_file"])
def test_git_directory_is_never_written(
    ctx: BuiltinContext, layout: dict[str, Path], tool: str, path: str
) -> None:
    for d in (layout["root"] / ".git", layout["root"] / "sub" / ".git"):
        d.mkdir(exist_ok=True)
        (d / "config").write_text("[core]\n")
    before = snapshot(layout["root"])
    args = (
        {"path": path, "content": "[core]\n\tfsmonitor = touch /tmp/pwned\n"}
        if tool != "delete_file"
        else {"path": path}
    )
    result = invoke_builtin(tool, tool, args, ctx)
    assert result.error_code == "INVALID_PARAMS" and ".git" in (result.error or "")
    assert snapshot(layout["root"]) == before


@pytest.mark.parametrize("path", [".", "", "sub/..", "{root}", "{root}/"])
def test_workspace_root_cannot_be_deleted_or_overwritten(
    ctx: BuiltinContext, layout: dict[str, Path], path: str
) -> None:
    before = snapshot(layout["root"])
    for tool, extra in (("delete_file", {"recursive": True}), ("write_file", {"content": "x"})):
        result = invoke_builtin(tool, tool, {"path": _fill(path, layout), **extra}, ctx)
        assert result.error_code == "INVALID_PARAMS", result
    assert snapshot(layout["root"]) == before
    assert layout["root"].is_dir()


def test_fifo_and_device_are_refused(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    os.mkfifo(layout["root"] / "pipe")
    (layout["root"] / "dev_link").symlink_to("/dev/zero")
    for path in ("pipe", "/dev/zero"):
        result = invoke_builtin("read_file", "read_file", {"path": path}, ctx)
        assert result.error_code == "INVALID_PARAMS", result
    result = invoke_builtin("write_file", "write_file", {"path": "pipe", "content": "x"}, ctx)
    assert result.error_code == "INVALID_PARAMS" and "fifo" in (result.error or "")


def test_symlink_race_on_the_final_component_is_defeated(layout: dict[str, Path]) -> None:
    ws = Workspace(layout["root"])
    real = ws.resolve("race.txt", write=True)  # checked: inside, does not exist yet
    (layout["root"] / "race.txt").symlink_to(layout["outside"] / "secret.txt")  # swapped in after the check
    with pytest.raises(InvalidParams, match="symlink"):
        ws.write_bytes(real, b"pwned")
    assert (layout["outside"] / "secret.txt").read_text() == "outside secret\n"
    with pytest.raises(InvalidParams):
        ws.open_read(real)


def test_symlink_race_on_the_parent_directory_is_defeated(layout: dict[str, Path]) -> None:
    ws = Workspace(layout["root"])
    real = ws.resolve("sub/inner.txt", write=True)
    os.rename(layout["root"] / "sub", layout["root"] / "sub_moved")
    (layout["root"] / "sub").symlink_to(layout["outside"])  # parent replaced by a link leading out
    (layout["outside"] / "inner.txt").write_text("outside inner\n")
    with pytest.raises(InvalidParams):
        ws.write_bytes(real, b"pwned")
    assert (layout["outside"] / "inner.txt").read_text() == "outside inner\n"


def test_parent_created_through_a_symlink_is_refused(ctx: BuiltinContext, escapes: dict[str, Path]) -> None:
    result = invoke_builtin("write_file", "write_file", {"path": "link_out/new/x.txt", "content": "x"}, ctx)
    assert result.error_code == "INVALID_PARAMS"
    assert not (escapes["outside"] / "new").exists()


_segment = st.sampled_from(
    ["..", ".", "sub", "hello.txt", "link_out", "demo", "demo_evil", "outside", "", "a b", "~"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    absolute=st.booleans(),
    segments=st.lists(st.one_of(_segment, st.text(min_size=1, max_size=6)), min_size=1, max_size=6),
)
def test_any_path_resolves_inside_or_is_refused(
    escapes: dict[str, Path], absolute: bool, segments: list[str]
) -> None:
    ws = Workspace(escapes["root"])
    path = "/".join(segments)
    if absolute:
        path = str(escapes["root"]) + "/" + path
    for write in (False, True):
        try:
            real = ws.resolve(path, write=write)
        except RuntimeToolError:
            continue
        assert real == ws.root or real.is_relative_to(ws.root)
        assert os.path.realpath(real) == str(real)
        try:
            entry = ws.resolve_entry(path)
        except RuntimeToolError:
            continue
        assert Path(os.path.realpath(entry.parent)).is_relative_to(ws.root)
        assert entry != ws.root
