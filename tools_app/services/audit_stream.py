"""The audit stream: every call's audit row, once it has its outcome, shipped as JSON lines to a file, syslog or
an HTTP endpoint (TOOLHUB_AUDIT_STREAM), in OCSF's API Activity shape (docs/operators.md, "Audit stream").

An outbox with a cursor: when a ToolCall is saved with its outcome (ok, error, denied) an AuditEvent row is added
in the same transaction (the call path's one extra INSERT; nothing on it waits for a sink). A shipper
(`manage.py toolhub_audit_ship`) sends the events past its sink's cursor in batches, oldest first, and moves the
cursor only once the sink acknowledged the batch (a 2xx, a written and fsync'd file, a sent syslog message), in
the transaction that read it. A sink that fails keeps the cursor where it was: the same batch is sent again after
a backoff, so nothing is lost; a restarted shipper begins at the stored cursor, so nothing acknowledged is sent
twice. Each record carries `metadata.uid` (the call's unique id) and `metadata.sequence` (its event id): a crash
between a sink's acknowledgement and the cursor's commit re-sends that one batch, which a receiver drops by uid.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx2
from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_save

from core.outbound import ssl_context
from core.version import VERSION
from tools_app.models import AuditCursor, AuditEvent, CallStatus, ToolCall

logger = logging.getLogger(__name__)

FINAL = (CallStatus.OK, CallStatus.ERROR, CallStatus.DENIED)
OCSF_VERSION = "1.3.0"
API_ACTIVITY = 6003  # OCSF class: API Activity (category 6, Application Activity)
ACTIVITY_OTHER = 99  # a tool call is none of Create/Read/Update/Delete; activity_name says what it is


class SinkError(Exception):
    """The sink did not take the batch; it is sent again later."""


class Sink(Protocol):
    name: str

    def send(self, lines: Sequence[str]) -> None: ...


class FileSink:
    """JSON lines appended to a file, fsync'd before the batch counts as sent."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.name = f"file:{path}"[:64]

    def send(self, lines: Sequence[str]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in lines))
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            raise SinkError(f"cannot write {self.path}: {exc.strerror or exc}") from None


class SyslogSink:
    """One RFC 5424 message per record over UDP (`syslog://host:port`) or TCP, octet-counted (`syslog+tcp://`)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.tcp = parts.scheme == "syslog+tcp"
        self.address = (parts.hostname or "127.0.0.1", parts.port or 514)
        self.name = url[:64]
        self.host = socket.gethostname()

    def _frame(self, line: str) -> bytes:
        # facility local0 (16), severity informational (6): <134>
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return f"<134>1 {stamp} {self.host} toolhub - audit - {line}".encode()

    def send(self, lines: Sequence[str]) -> None:
        try:
            if self.tcp:
                with socket.create_connection(self.address, timeout=5) as conn:
                    for line in lines:
                        frame = self._frame(line)
                        conn.sendall(f"{len(frame)} ".encode() + frame)
            else:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as conn:
                    for line in lines:
                        conn.sendto(self._frame(line), self.address)
        except OSError as exc:
            raise SinkError(f"syslog {self.address[0]}:{self.address[1]}: {exc.strerror or exc}") from None


class HttpSink:
    """A batch as one POST of `application/x-ndjson`; any 2xx acknowledges it."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout_s: float = 10.0) -> None:
        self.url = url
        self.name = urlsplit(url)._replace(query="", fragment="").geturl()[:64]
        self.headers = {"Content-Type": "application/x-ndjson", **(headers or {})}
        self.timeout_s = timeout_s

    def send(self, lines: Sequence[str]) -> None:
        body = "".join(line + "\n" for line in lines).encode()
        first, last = json.loads(lines[0])["metadata"]["sequence"], json.loads(lines[-1])["metadata"]["sequence"]
        headers = {**self.headers, "Idempotency-Key": f"toolhub-audit-{first}-{last}"}
        try:
            answer = httpx2.post(self.url, content=body, headers=headers, timeout=self.timeout_s, verify=ssl_context())
        except httpx2.HTTPError as exc:
            raise SinkError(f"POST {self.name}: {type(exc).__name__}") from None
        if not 200 <= answer.status_code < 300:
            raise SinkError(f"POST {self.name}: HTTP {answer.status_code}")


def sink_from(target: str, headers: dict[str, str] | None = None) -> Sink:
    """TOOLHUB_AUDIT_STREAM's sink: `file:/path`, `syslog://host:port`, `syslog+tcp://host:port`, `http(s)://...`."""
    if target.startswith("file:"):
        return FileSink(target[len("file:"):])
    if target.startswith(("syslog://", "syslog+tcp://")):
        return SyslogSink(target)
    if target.startswith(("http://", "https://")):
        return HttpSink(target, headers)
    raise ValueError(f"TOOLHUB_AUDIT_STREAM {target!r}: accepted: file:/path, syslog://host:port, "
                     "syslog+tcp://host:port, http(s)://...")


# --- the outbox -------------------------------------------------------------------------------------------------


def _outcome(sender: Any, instance: ToolCall, **kwargs: Any) -> None:
    if not settings.TOOLHUB_AUDIT_STREAM or instance.status not in FINAL or instance.pk is None:
        return
    # One event per call, whenever its outcome is first saved (a held call gets it when it settles).
    AuditEvent.objects.bulk_create([AuditEvent(tool_call_id=instance.pk)], ignore_conflicts=True)


def connect() -> None:
    post_save.connect(_outcome, sender=ToolCall, dispatch_uid="toolhub-audit-stream-outbox")


# --- the record -------------------------------------------------------------------------------------------------


def record(event_id: int, call: ToolCall) -> dict[str, Any]:
    """One call as an OCSF API Activity event (class 6003), Toolhub's own fields under `unmapped.toolhub`."""
    ok = call.status == CallStatus.OK
    approval = getattr(call, "approval", None)  # none: the reverse one-to-one raises an AttributeError
    actor = call.actor
    return {
        "class_uid": API_ACTIVITY, "class_name": "API Activity",
        "category_uid": 6, "category_name": "Application Activity",
        "activity_id": ACTIVITY_OTHER, "activity_name": "Invoke", "type_uid": API_ACTIVITY * 100 + ACTIVITY_OTHER,
        "time": int(call.created_at.timestamp() * 1000),
        "severity_id": 1 if ok else 3, "severity": "Informational" if ok else "Medium",
        "status_id": 1 if ok else 2, "status": "Success" if ok else "Failure",
        "status_code": call.error_code or None, "status_detail": (call.error or None) if not ok else None,
        "duration": call.cost_ms,
        # OCSF's `count`: the calls the record stands for (1, or the quota refusals of one minute folded together).
        "count": call.call_count,
        "actor": {"user": {"uid": str(call.actor_id) if call.actor_id else None,
                           "name": actor.username if actor is not None else None},
                  "app_name": call.client or None},
        "api": {"operation": "tools/call", "service": {"name": call.tool_name},
                "request": {"uid": str(call.call_uid) if call.call_uid else None}},
        "metadata": {"version": OCSF_VERSION, "uid": str(call.call_uid) if call.call_uid else str(call.pk),
                     "sequence": event_id, "tenant_uid": str(call.tenant_id),
                     "product": {"name": "Toolhub", "vendor_name": "Toolhub", "version": VERSION}},
        "unmapped": {"toolhub": {
            "call_id": call.pk, "tenant": call.tenant.slug, "via": call.via or None,
            "agent": {"id": call.agent_id, "name": call.agent.name} if call.agent_id and call.agent else None,
            "tool": {"id": call.tool_id, "name": call.tool_name}, "function": call.function,
            "outcome": call.status, "dry_run": call.dry_run,
            "approval": ({"id": approval.pk, "status": approval.status,
                          "decided_by": approval.decided_by.username if approval.decided_by else None}
                         if approval is not None else None),
        }},
    }


# --- the shipper ------------------------------------------------------------------------------------------------


def ship_once(sink: Sink, *, batch: int | None = None) -> int:
    """Send the next batch past the sink's cursor; the number sent (0: nothing new). Raises SinkError."""
    size = int(batch or settings.TOOLHUB_AUDIT_STREAM_BATCH)
    failed: SinkError | None = None
    # The cursor's row lock is held while the batch is sent: a second shipper of the same sink waits, never
    # sends the same batch beside it.
    with transaction.atomic():
        cursor, _ = AuditCursor.objects.select_for_update().get_or_create(sink=sink.name)
        events = list(AuditEvent.objects.filter(id__gt=cursor.last_id).order_by("id")
                      .select_related("tool_call__tenant", "tool_call__actor", "tool_call__agent",
                                      "tool_call__approval__decided_by")[:size])
        if not events:
            return 0
        lines = [json.dumps(record(e.id, e.tool_call), ensure_ascii=False, default=str) for e in events]
        try:
            sink.send(lines)
        except SinkError as exc:
            failed = exc  # the cursor stays; the failure is noted below, outside this transaction
        else:
            cursor.last_id, cursor.shipped, cursor.last_error = events[-1].id, cursor.shipped + len(events), ""
            cursor.save(update_fields=["last_id", "shipped", "last_error", "updated_at"])
    if failed is not None:
        AuditCursor.objects.filter(sink=sink.name).update(last_error=str(failed)[:2000])
        raise failed
    return len(events)


def ship(sink: Sink, *, stop: Any = None, interval_s: float | None = None, max_backoff_s: float = 60.0) -> None:
    """Ship until `stop()` is true: batches back to back while there is a backlog, a pause when caught up, a
    growing backoff (up to max_backoff_s) while the sink fails."""
    pause = float(interval_s if interval_s is not None else settings.TOOLHUB_AUDIT_STREAM_INTERVAL_S)
    backoff = pause
    while not (stop and stop()):
        try:
            sent = ship_once(sink)
            backoff = pause
        except SinkError as exc:
            logger.warning("audit stream: %s; retrying in %.1fs", exc, backoff)
            time.sleep(backoff)
            backoff = min(max_backoff_s, backoff * 2)
            continue
        if not sent:
            time.sleep(pause)
