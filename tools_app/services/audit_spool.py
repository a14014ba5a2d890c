"""The audit spool: a call that ran keeps its audit row when the database is away at the moment of the INSERT.

`audit()` builds the ToolCall (arguments redacted, result scrubbed) and inserts it; when that INSERT fails with a
database outage, the built row goes here: one JSON file per row under TOOLHUB_AUDIT_SPOOL_DIR, written to a
temporary name, fsync'd and renamed, so a file is whole or absent. `replay()` inserts the spooled rows (the row's
`call_uid` is unique, so a row replayed twice is one row) and deletes each file only once its row is committed.
It runs from Celery beat (`tools.replay_audit_spool`), after the next successful audit write of a process that
spooled (or that found files at start), and from `manage.py replay_audit_spool`.

A file that cannot be read back as a row is moved to `corrupt/` and reported, never deleted.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from tools_app.models import ToolCall

logger = logging.getLogger(__name__)

SUFFIX = ".json"
# Rows that reference what no longer exists (their tenant was deleted while spooled) go here, not away.
REJECTED = "rejected"
CORRUPT = "corrupt"
# Nullable references a replay drops when their row was deleted meanwhile (as on_delete=SET_NULL would).
_NULLABLE_FKS = ("tool_id", "actor_id", "agent_id", "conversation_id")

_lock = threading.Lock()
_pending: bool | None = None  # None: not looked yet in this process (files left by an earlier process?)


def spool_dir() -> Path:
    return Path(settings.TOOLHUB_AUDIT_SPOOL_DIR)


def as_record(call: ToolCall) -> dict[str, Any]:
    """Every stored field of the built row, by column (`tenant_id`...), as JSON values."""
    record: dict[str, Any] = {}
    for f in ToolCall._meta.concrete_fields:
        if f.primary_key:
            continue
        value = getattr(call, f.attname)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, uuid.UUID):
            value = str(value)
        record[f.attname] = value
    return record


def from_record(record: dict[str, Any]) -> ToolCall:
    """The row back from a record; raises ValueError/KeyError/TypeError when the record is not one."""
    names = {f.attname for f in ToolCall._meta.concrete_fields if not f.primary_key}
    unknown = set(record) - names
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}")
    values = dict(record)
    values["call_uid"] = uuid.UUID(str(values["call_uid"]))
    values["created_at"] = datetime.fromisoformat(str(values["created_at"]))
    return ToolCall(**values)


def spool(call: ToolCall) -> Path:
    """Write the built row durably (temp name, fsync, rename, fsync of the directory); returns its path."""
    global _pending
    directory = spool_dir()
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{call.call_uid}{SUFFIX}"
    temp = directory / f".{call.call_uid}.tmp"
    data = json.dumps(as_record(call), default=str).encode()
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, final)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    _pending = True
    # Counted where it was answered, as a stored row is on its post_save (a replay's bulk insert sends none).
    from tools_app import metrics

    metrics._observe_call(ToolCall, call)
    return final


def spooled_files() -> list[Path]:
    directory = spool_dir()
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(SUFFIX)
                  and not p.name.startswith("."))


@dataclass
class Replay:
    inserted: int = 0  # rows written by this replay
    already: int = 0  # files whose row was already stored (an earlier replay committed, then stopped)
    corrupt: list[str] = field(default_factory=list)  # files moved to corrupt/
    rejected: list[str] = field(default_factory=list)  # rows whose tenant is gone, moved to rejected/
    left: int = 0  # files left for the next replay (the database went away again)

    def as_dict(self) -> dict[str, Any]:
        return {"inserted": self.inserted, "already": self.already, "corrupt": self.corrupt,
                "rejected": self.rejected, "left": self.left}


def _move_aside(path: Path, where: str, why: str) -> str:
    target_dir = path.parent / where
    target_dir.mkdir(exist_ok=True)
    target = target_dir / path.name
    os.replace(path, target)
    logger.error("audit spool: %s moved to %s/: %s", path.name, where, why)
    return str(target)


def _store(call: ToolCall, path: Path) -> bool:
    """Insert the row unless its call_uid is stored already, and delete its file once that commits; True when
    this inserted it."""
    with transaction.atomic():
        stored = ToolCall.objects.filter(call_uid=call.call_uid).exists()
        if not stored:
            ToolCall.objects.bulk_create([call], ignore_conflicts=True)
        transaction.on_commit(lambda: path.unlink(missing_ok=True))
    return not stored


def _drop_missing_references(call: ToolCall) -> bool:
    """Null the nullable references whose row is gone; False when the tenant itself is gone."""
    from tenants_app.models import Tenant

    if not Tenant.objects.filter(pk=call.tenant_id).exists():
        return False
    for attname in _NULLABLE_FKS:
        value = getattr(call, attname)
        related = ToolCall._meta.get_field(attname.removesuffix("_id")).related_model
        if value is not None and not related._default_manager.filter(pk=value).exists():  # type: ignore[union-attr]
            setattr(call, attname, None)
    return True


def replay(limit: int | None = None) -> Replay:
    """Insert spooled rows, oldest file name first; each file is deleted after its row's commit.

    Stops (files left in place) at the first database outage. Safe to run in several processes at once:
    a row already stored is not inserted again and its file is deleted.
    """
    from core.exceptions import unavailable_service

    global _pending
    report = Replay()
    with _lock:
        _pending = False
        files = spooled_files()
        for index, path in enumerate(files):
            if limit is not None and index >= limit:
                report.left = len(files) - index
                _pending = True
                break
            try:
                record = json.loads(path.read_text())
                if not isinstance(record, dict):
                    raise ValueError("not a JSON object")
                call = from_record(record)
            except FileNotFoundError:
                continue  # another process replayed it meanwhile
            except (ValueError, KeyError, TypeError) as exc:
                report.corrupt.append(_move_aside(path, CORRUPT, f"{type(exc).__name__}: {exc}"))
                continue
            try:
                try:
                    inserted = _store(call, path)
                except IntegrityError:
                    if not _drop_missing_references(call):
                        report.rejected.append(_move_aside(path, REJECTED, "its tenant no longer exists"))
                        continue
                    inserted = _store(call, path)
            except Exception as exc:
                if unavailable_service(exc) is None:
                    raise
                report.left = len(files) - index
                _pending = True
                logger.warning("audit spool: database unavailable, %d file(s) left: %s", report.left,
                               type(exc).__name__)
                break
            if inserted:
                report.inserted += 1
            else:
                report.already += 1
    if report.inserted or report.already or report.corrupt or report.rejected:
        logger.info("audit spool replay: %s", report.as_dict())
    return report


def replay_if_pending() -> None:
    """After a successful audit write: replay when this process spooled rows, or found files at start.

    Costs nothing on the warm path once it knows the spool is empty (one directory look per process start).
    """
    global _pending
    if _pending is None:
        _pending = bool(spooled_files())
    if not _pending or not _lock.acquire(blocking=False):
        return
    _lock.release()
    try:
        replay(limit=settings.TOOLHUB_AUDIT_SPOOL_REPLAY_BATCH)
    except Exception:  # the caller's row is stored; the beat task retries what is left
        _pending = True
        logger.exception("audit spool: replay after an audit write failed")
