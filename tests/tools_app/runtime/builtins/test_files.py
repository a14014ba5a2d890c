"""File built-ins: read (32 KiB cap), list (depth, cap), write, edit (exact replace), delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools_app.runtime.builtins import BuiltinContext, invoke_builtin
from tools_app.runtime.builtins.files import LIST_ENTRY_CAP, READ_CAP_BYTES

from .conftest import snapshot


def call(ctx: BuiltinContext, tool: str, **arguments: object):
    return invoke_builtin(tool, tool, arguments, ctx)


def test_read_file_relative_and_absolute(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    for path in ("hello.txt", str(layout["root"] / "hello.txt"), "./sub/../hello.txt"):
        result = call(ctx, "read_file", path=path)
        assert result.success, result
        assert result.data["content"] == "hello world\n"
        assert result.data["size"] == 12 and result.data["modified"]
        assert "size 12 bytes" in result.text


def test_read_file_truncates_at_32_kib_without_splitting_a_character(
    ctx: BuiltinContext, layout: dict[str, Path]
) -> None:
    (layout["root"] / "big.txt").write_text("é" * READ_CAP_BYTES)  # 2 bytes each
    result = call(ctx, "read_file", path="big.txt")
    assert result.success and result.data["truncated"]
    assert len(result.data["content"].encode()) <= READ_CAP_BYTES
    assert "[truncated" in result.text


def test_read_file_errors(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    (layout["root"] / "bin").write_bytes(b"\xff\xfe\x00")
    assert call(ctx, "read_file", path="missing.txt").error_code == "BUSINESS_ERROR"
    assert call(ctx, "read_file", path="sub").error_code == "BUSINESS_ERROR"
    assert "UTF-8" in (call(ctx, "read_file", path="bin").error or "")


def test_list_directory_depth_and_links(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    (layout["root"] / "sub" / "deeper").mkdir()
    (layout["root"] / "sub" / "deeper" / "x.txt").write_text("x")
    (layout["root"] / "out").symlink_to(layout["outside"])
    flat = call(ctx, "list_directory")
    assert {e["path"] for e in flat.data["entries"]} == {"hello.txt", "sub", "out"}
    deep = call(ctx, "list_directory", recursive=True, depth=3)
    paths = {e["path"] for e in deep.data["entries"]}
    assert "sub/deeper/x.txt" in paths
    assert not any(p.startswith("out/") for p in paths)  # links are listed, never followed
    two = call(ctx, "list_directory", recursive=True, depth=2)
    assert "sub/deeper" in {e["path"] for e in two.data["entries"]}
    assert "sub/deeper/x.txt" not in {e["path"] for e in two.data["entries"]}


def test_list_directory_entry_cap(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    many = layout["root"] / "many"
    many.mkdir()
    for i in range(LIST_ENTRY_CAP + 5):
        (many / f"f{i:05}").touch()
    result = call(ctx, "list_directory", path="many")
    assert result.data["truncated"] and len(result.data["entries"]) == LIST_ENTRY_CAP
    assert "[truncated" in result.text


def test_write_file_creates_parents_and_overwrites(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    result = call(ctx, "write_file", path="a/b/c.txt", content="one")
    assert result.success and result.data["created"]
    assert (layout["root"] / "a/b/c.txt").read_text() == "one"
    result = call(ctx, "write_file", path="a/b/c.txt", content="two")
    assert result.success and not result.data["created"]
    assert (layout["root"] / "a/b/c.txt").read_text() == "two"
    assert call(ctx, "write_file", path="sub", content="x").error_code == "BUSINESS_ERROR"


@pytest.mark.parametrize(
    ("arguments", "code", "fragment"),
    [
        ({"path": "hello.txt", "old_text": "nope", "new_text": "x"}, "BUSINESS_ERROR", "not found"),
        ({"path": "twice.txt", "old_text": "ab", "new_text": "x"}, "BUSINESS_ERROR", "unique"),
        ({"path": "missing.txt", "content": "x"}, "BUSINESS_ERROR", "existing file"),
        ({"path": "hello.txt"}, "INVALID_PARAMS", "either content"),
        (
            {"path": "hello.txt", "content": "x", "old_text": "h", "new_text": "j"},
            "INVALID_PARAMS",
            "either content",
        ),
        ({"path": "hello.txt", "old_text": "", "new_text": "j"}, "INVALID_PARAMS", "non-empty"),
        ({"path": "hello.txt", "old_text": "hello"}, "INVALID_PARAMS", "both required"),
    ],
)
def test_edit_file_refusals_change_nothing(
    ctx: BuiltinContext, layout: dict[str, Path], arguments: dict[str, object], code: str, fragment: str
) -> None:
    (layout["root"] / "twice.txt").write_text("ab ab")
    before = snapshot(layout["root"])
    result = invoke_builtin("edit_file", "edit_file", arguments, ctx)
    assert result.error_code == code and fragment in (result.error or ""), result
    assert snapshot(layout["root"]) == before


def test_edit_file_replaces(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    assert call(ctx, "edit_file", path="hello.txt", old_text="world", new_text="there").success
    assert (layout["root"] / "hello.txt").read_text() == "hello there\n"
    assert call(ctx, "edit_file", path="hello.txt", content="new\n").success
    assert (layout["root"] / "hello.txt").read_text() == "new\n"


def test_delete_file(ctx: BuiltinContext, layout: dict[str, Path]) -> None:
    before = snapshot(layout["root"])
    result = call(ctx, "delete_file", path="sub")
    assert result.error_code == "BUSINESS_ERROR" and "recursive" in (result.error or "")
    assert snapshot(layout["root"]) == before
    assert call(ctx, "delete_file", path="sub", recursive=True).success
    assert not (layout["root"] / "sub").exists()
    assert call(ctx, "delete_file", path="hello.txt").success
    assert call(ctx, "delete_file", path="hello.txt").error_code == "BUSINESS_ERROR"
    (layout["root"] / "empty").mkdir()
    assert call(ctx, "delete_file", path="empty").success
