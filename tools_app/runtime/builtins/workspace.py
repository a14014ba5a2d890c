"""Workspace confinement: every file path a built-in touches resolves (realpath) inside the tenant root."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tools_app.runtime.errors import BusinessError, InvalidParams

PROTECTED_DIRS = frozenset({".git"})  # writes below these would let a path run code (hooks, config)


class Workspace:
    """A tenant's workspace root and the checks that keep file operations inside it."""

    def __init__(self, root: Path | str) -> None:
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise BusinessError(f"workspace directory {root!s} does not exist")
        self.root = Path(real)

    # -- resolution -------------------------------------------------------------------------------

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The realpath of `path` (relative to the root, or absolute inside it), or InvalidParams."""
        candidate = self._candidate(path)
        real = Path(os.path.realpath(candidate))
        self._check_inside(real, path)
        if write:
            self._check_writable(real, path)
        self._check_file_type(real, path)
        return real

    def resolve_entry(self, path: str) -> Path:
        """Resolve the parent with realpath but keep the last component, so a symlink names itself.

        Used by delete: removing a link removes the link, never what it points to.
        """
        candidate = self._candidate(path)
        head, tail = os.path.split(os.fspath(candidate).rstrip(os.sep) or os.sep)
        if tail in ("", ".", ".."):
            real = Path(os.path.realpath(candidate))
            self._check_inside(real, path)
            if real == self.root:
                raise InvalidParams("refusing to operate on the workspace root itself")
            return real
        parent = Path(os.path.realpath(head))
        self._check_inside(parent, path)
        entry = parent / tail
        self._check_writable(entry, path)
        return entry

    def relative(self, real: Path) -> str:
        rel = os.path.relpath(real, self.root)
        return "." if rel == "." else rel.replace(os.sep, "/")

    def _candidate(self, path: str) -> Path:
        if not isinstance(path, str) or path == "":
            raise InvalidParams(
                "path must be a non-empty string (relative to the workspace or absolute inside it)"
            )
        if "\x00" in path:
            raise InvalidParams("path contains a NUL byte (rule: no NUL in paths)")
        expanded = Path(path)
        return expanded if expanded.is_absolute() else self.root / expanded

    def _check_inside(self, real: Path, original: str) -> None:
        if real != self.root and not real.is_relative_to(self.root):
            raise InvalidParams(
                f"path {original!r} resolves outside the workspace (rule: paths must stay inside the "
                "tenant workspace; '..', outside absolute paths and symlinks leading out are refused)"
            )

    def _check_writable(self, real: Path, original: str) -> None:
        if real == self.root:
            raise InvalidParams(
                f"path {original!r} is the workspace root itself (rule: the root may not be replaced or deleted)"
            )
        parts = real.relative_to(self.root).parts
        if any(part.lower() in PROTECTED_DIRS for part in parts):
            raise InvalidParams(
                f"path {original!r} is inside .git (rule: .git/ may not be written or deleted)"
            )

    @staticmethod
    def _check_file_type(real: Path, original: str) -> None:
        try:
            st = os.stat(real)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise BusinessError(f"cannot stat {original!r}: {exc.strerror}") from None
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise InvalidParams(
                f"path {original!r} is not a regular file or directory (rule: no devices, fifos, sockets)"
            )

    # -- race-safe opening ------------------------------------------------------------------------

    def open_parent(self, real: Path, *, create: bool = False) -> int:
        """An O_DIRECTORY|O_NOFOLLOW fd for `real`'s parent, re-checked to still be inside the root."""
        parent = real.parent
        if create:
            self._make_dirs(parent)
        try:
            fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise BusinessError(f"directory {self.relative(parent)!r} does not exist") from None
        except OSError as exc:
            raise InvalidParams(
                f"directory {self.relative(parent)!r} changed or is a symlink (rule: no symlinks leading out): "
                f"{exc.strerror}"
            ) from None
        if self._fd_path(fd) not in (None, parent):
            os.close(fd)
            raise InvalidParams(
                f"directory {self.relative(parent)!r} moved outside the workspace between check and open "
                "(rule: no symlink race)"
            )
        return fd

    def _fd_path(self, fd: int) -> Path | None:
        link = f"/proc/self/fd/{fd}"
        if not os.path.exists(link):
            return None
        return Path(os.readlink(link))

    def _make_dirs(self, parent: Path) -> None:
        # Create one level at a time, re-resolving each, so a symlink planted mid-way cannot lead out.
        missing: list[Path] = []
        cur = parent
        while not cur.exists() and cur != self.root:
            missing.append(cur)
            cur = cur.parent
        for directory in reversed(missing):
            real_parent = Path(os.path.realpath(directory.parent))
            self._check_inside(real_parent, self.relative(directory))
            try:
                os.mkdir(real_parent / directory.name)
            except FileExistsError:
                pass
        real = Path(os.path.realpath(parent))
        self._check_inside(real, self.relative(parent))
        if not real.is_dir():
            raise BusinessError(f"{self.relative(parent)!r} is not a directory")

    def write_bytes(
        self, real: Path, data: bytes, *, create_parents: bool = True, must_exist: bool = False
    ) -> None:
        """Write `data` to `real` via the parent fd with O_NOFOLLOW: a symlink swapped in is refused."""
        dir_fd = self.open_parent(real, create=create_parents)
        try:
            flags = os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
            if not must_exist:
                flags |= os.O_CREAT
            try:
                fd = os.open(real.name, flags, 0o644, dir_fd=dir_fd)
            except FileNotFoundError:
                raise BusinessError(f"file {self.relative(real)!r} does not exist") from None
            except IsADirectoryError:
                raise BusinessError(f"{self.relative(real)!r} is a directory") from None
            except OSError as exc:
                raise InvalidParams(
                    f"cannot open {self.relative(real)!r} for writing (rule: no symlinks, fifos or devices): "
                    f"{exc.strerror}"
                ) from None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise InvalidParams(f"{self.relative(real)!r} is not a regular file")
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            finally:
                os.close(fd)
        finally:
            os.close(dir_fd)

    def open_read(self, real: Path) -> int:
        """A read fd for the regular file `real`, opened without following a swapped-in symlink."""
        dir_fd = self.open_parent(real)
        try:
            try:
                fd = os.open(
                    real.name,
                    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                    dir_fd=dir_fd,
                )
            except FileNotFoundError:
                raise BusinessError(f"file {self.relative(real)!r} does not exist") from None
            except OSError as exc:
                raise InvalidParams(
                    f"cannot open {self.relative(real)!r} (rule: no symlink race): {exc.strerror}"
                ) from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise InvalidParams(f"{self.relative(real)!r} is not a regular file")
            return fd
        finally:
            os.close(dir_fd)
