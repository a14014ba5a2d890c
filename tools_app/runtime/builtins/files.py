"""File built-ins confined to the tenant workspace: read, list, write, edit, delete."""

from __future__ import annotations

import codecs
import os
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field, model_validator

from tools_app.runtime.builtins.context import BuiltinContext
from tools_app.runtime.builtins.registry import BuiltinArgs, Safety, builtin
from tools_app.runtime.builtins.workspace import Workspace
from tools_app.runtime.errors import BusinessError, InvalidParams
from tools_app.runtime.result import ToolResult

READ_CAP_BYTES = 32 * 1024
LIST_ENTRY_CAP = 1000
WRITE_CAP_BYTES = 10 * 1024 * 1024


def _info(real: Path, ws: Workspace) -> dict[str, object]:
    st = os.stat(real)
    return {
        "path": ws.relative(real),
        "size": st.st_size,
        "modified": datetime.fromtimestamp(st.st_mtime, tz=UTC).isoformat(timespec="seconds"),
    }


class ReadFileArgs(BuiltinArgs):
    path: str = Field(description="File path, relative to the workspace or absolute inside it")


@builtin(
    name="read_file",
    description="Read a UTF-8 text file from the workspace (first 32 KiB).",
    safety=Safety.READ_ONLY,
)
def read_file(args: ReadFileArgs, ctx: BuiltinContext) -> ToolResult:
    ws = Workspace(ctx.workspace)
    real = ws.resolve(args.path)
    if real.is_dir():
        raise BusinessError(f"{args.path!r} is a directory; use list_directory")
    fd = ws.open_read(real)
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(READ_CAP_BYTES + 1)
    truncated = len(raw) > READ_CAP_BYTES
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        content = decoder.decode(raw[:READ_CAP_BYTES], final=not truncated)
    except UnicodeDecodeError:
        raise BusinessError(f"{args.path!r} is not UTF-8 text") from None
    info = _info(real, ws)
    notice = f"[truncated: showing the first {READ_CAP_BYTES} of {info['size']} bytes]\n" if truncated else ""
    text = (
        f"{content}\n{notice}[file: {info['path']}, size {info['size']} bytes, modified {info['modified']}]"
    )
    return ToolResult.ok(data={**info, "content": content, "truncated": truncated}, text=text)


class ListDirectoryArgs(BuiltinArgs):
    path: str = Field(default=".", description="Directory, relative to the workspace or absolute inside it")
    recursive: bool = Field(default=False, description="Descend into subdirectories")
    depth: int = Field(default=1, ge=1, le=10, description="Maximum depth when recursive (1-10)")


@builtin(
    name="list_directory",
    description="List a workspace directory, optionally recursively (depth 1-10).",
    safety=Safety.READ_ONLY,
)
def list_directory(args: ListDirectoryArgs, ctx: BuiltinContext) -> ToolResult:
    ws = Workspace(ctx.workspace)
    real = ws.resolve(args.path)
    if not real.is_dir():
        raise BusinessError(
            f"{args.path!r} is not a directory" if real.exists() else f"{args.path!r} does not exist"
        )
    max_depth = args.depth if args.recursive else 1
    entries: list[dict[str, object]] = []
    truncated = False
    stack: list[tuple[Path, int]] = [(real, 1)]
    while stack and not truncated:
        directory, level = stack.pop()
        try:
            with os.scandir(directory) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in children:
            if len(entries) >= LIST_ENTRY_CAP:
                truncated = True
                break
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished while listing
            kind = (
                "link"
                if stat.S_ISLNK(st.st_mode)
                else "dir"
                if stat.S_ISDIR(st.st_mode)
                else ("file" if stat.S_ISREG(st.st_mode) else "other")
            )
            entries.append(
                {
                    "path": ws.relative(Path(entry.path)),
                    "type": kind,
                    "size": st.st_size if kind == "file" else None,
                }
            )
            # Symlinks are listed, never followed: one could lead out of the workspace.
            if kind == "dir" and level < max_depth:
                subdirs.append((Path(entry.path), level + 1))
        stack.extend(reversed(subdirs))
    lines = [f"{e['path']}{'/' if e['type'] == 'dir' else ''}" for e in entries]
    if truncated:
        lines.append(f"[truncated: listing stopped at {LIST_ENTRY_CAP} entries]")
    return ToolResult.ok(
        data={"path": ws.relative(real), "entries": entries, "truncated": truncated},
        text="\n".join(lines) or "(empty directory)",
    )


class WriteFileArgs(BuiltinArgs):
    path: str = Field(description="File path, relative to the workspace or absolute inside it")
    content: str = Field(description="Complete new file content (UTF-8)")


@builtin(
    name="write_file",
    description="Create or overwrite a workspace file, creating parent directories.",
    safety=Safety.WRITE,
)
def write_file(args: WriteFileArgs, ctx: BuiltinContext) -> ToolResult:
    ws = Workspace(ctx.workspace)
    real = ws.resolve(args.path, write=True)
    data = _encode(args.content)
    if real.is_dir():
        raise BusinessError(f"{args.path!r} is a directory")
    existed = real.exists()
    ws.write_bytes(real, data, create_parents=True)
    verb = "overwrote" if existed else "created"
    return ToolResult.ok(
        data={"path": ws.relative(real), "size": len(data), "created": not existed},
        text=f"{verb} {ws.relative(real)} ({len(data)} bytes)",
    )


def _encode(content: str) -> bytes:
    data = content.encode("utf-8", errors="strict")
    if len(data) > WRITE_CAP_BYTES:
        raise InvalidParams(f"content is {len(data)} bytes; the cap is {WRITE_CAP_BYTES}")
    return data


class EditFileArgs(BuiltinArgs):
    path: str = Field(description="Existing file, relative to the workspace or absolute inside it")
    content: str | None = Field(default=None, description="Complete replacement content")
    old_text: str | None = Field(default=None, description="Exact text to replace (must occur exactly once)")
    new_text: str | None = Field(default=None, description="Replacement for old_text")

    @model_validator(mode="after")
    def _one_mode(self) -> EditFileArgs:
        whole = self.content is not None
        exact = self.old_text is not None or self.new_text is not None
        if whole == exact:
            raise ValueError("give either content, or old_text and new_text (not both, not neither)")
        if exact and (self.old_text is None or self.new_text is None or self.old_text == ""):
            raise ValueError("old_text (non-empty) and new_text are both required for a replacement")
        return self


@builtin(
    name="edit_file",
    description="Edit an existing workspace file: replace its content, or one exact "
    "occurrence of old_text with new_text.",
    safety=Safety.WRITE,
)
def edit_file(args: EditFileArgs, ctx: BuiltinContext) -> ToolResult:
    ws = Workspace(ctx.workspace)
    real = ws.resolve(args.path, write=True)
    if not real.is_file():
        raise BusinessError(f"{args.path!r} is not an existing file (edit_file only edits existing files)")
    if args.content is not None:
        new = args.content
    else:
        assert args.old_text is not None and args.new_text is not None
        fd = ws.open_read(real)
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(WRITE_CAP_BYTES + 1)
        if len(raw) > WRITE_CAP_BYTES:
            raise BusinessError(f"{args.path!r} is larger than {WRITE_CAP_BYTES} bytes; edit_file refuses it")
        try:
            old = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BusinessError(f"{args.path!r} is not UTF-8 text") from None
        count = old.count(args.old_text)
        if count == 0:
            raise BusinessError(
                f"old_text not found in {args.path!r} (rule: old_text must occur exactly once)"
            )
        if count > 1:
            raise BusinessError(
                f"old_text occurs {count} times in {args.path!r} (rule: old_text must be unique)"
            )
        new = old.replace(args.old_text, args.new_text, 1)
    data = _encode(new)
    ws.write_bytes(real, data, create_parents=False, must_exist=True)
    return ToolResult.ok(
        data={"path": ws.relative(real), "size": len(data)},
        text=f"edited {ws.relative(real)} ({len(data)} bytes)",
    )


class DeleteFileArgs(BuiltinArgs):
    path: str = Field(description="File or directory, relative to the workspace or absolute inside it")
    recursive: bool = Field(default=False, description="Required to delete a non-empty directory")


@builtin(
    name="delete_file",
    description="Delete a workspace file or directory (non-empty needs recursive).",
    safety=Safety.DESTRUCTIVE,
)
def delete_file(args: DeleteFileArgs, ctx: BuiltinContext) -> ToolResult:
    ws = Workspace(ctx.workspace)
    entry = ws.resolve_entry(args.path)
    try:
        st = os.lstat(entry)
    except FileNotFoundError:
        raise BusinessError(f"{args.path!r} does not exist") from None
    rel = ws.relative(entry)
    if stat.S_ISDIR(st.st_mode):
        with os.scandir(entry) as it:
            non_empty = any(True for _ in it)
        if non_empty:
            if not args.recursive:
                raise BusinessError(
                    f"directory {rel!r} is not empty (rule: pass recursive=true to delete it)"
                )
            # rmtree never follows symlinks (fd-based on Linux), so links inside cannot lead out.
            shutil.rmtree(entry)
        else:
            os.rmdir(entry)
        kind = "directory"
    else:
        os.unlink(entry)
        kind = "link" if stat.S_ISLNK(st.st_mode) else "file"
    return ToolResult.ok(data={"path": rel, "type": kind}, text=f"deleted {kind} {rel}")
