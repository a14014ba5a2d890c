"""The audit stream against a real HTTP receiver the test starts: every call's record arrives once, through a
receiver outage (errors, then down) and restarts of the shipper; a file and a syslog sink; the OCSF record."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tenants_app.models import Role
from tests.fixtures.mcp_servers import free_port
from tests.waiting import wait_until
from tools_app.models import AuditCursor, AuditEvent, CallStatus, Tool, ToolCall
from tools_app.services import audit_stream, quotas

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A log collector on 127.0.0.1: keeps the JSON lines of each POST it accepts; `failing` answers 503."""

    def __init__(self, port: int) -> None:
        self.port, self.failing, self.posts = port, False, 0
        self.records: list[dict[str, Any]] = []
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/ingest"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts += 1
                if receiver.failing:
                    self.send_response(503)
                    self.end_headers()
                    return
                assert self.headers["Content-Type"] == "application/x-ndjson"
                receiver.records += [json.loads(line) for line in body.decode().splitlines()]
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()


class Shipper:
    """The shipper's loop in a thread, as `manage.py toolhub_audit_ship` runs it; stop() ends it between batches."""

    running: list[Shipper] = []

    def __init__(self, sink: Any) -> None:
        Shipper.running.append(self)
        self.stopping = False
        self.thread = threading.Thread(target=self._run, args=(sink,), daemon=True)
        self.thread.start()

    def _run(self, sink: Any) -> None:
        from django.db import connection

        try:
            audit_stream.ship(sink, stop=lambda: self.stopping, interval_s=0.05, max_backoff_s=0.2)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopping = True
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture(autouse=True)
def _shippers_stopped() -> Iterator[None]:
    yield
    for shipper in Shipper.running:
        shipper.stopping = True
        shipper.thread.join(10)
    Shipper.running.clear()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    one = Receiver(free_port())
    one.start()
    settings.TOOLHUB_AUDIT_STREAM = one.url
    yield one
    if one.server is not None:
        try:
            one.stop()
        except OSError:
            pass


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    quotas._store.forget()
    yield
    quotas._store.forget()


def invoke(client: Any, tool: Tool, path: str = ".") -> Any:
    return client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": tool.name, "arguments": {"path": path}},
                       format="json")


def final_calls() -> list[ToolCall]:
    return list(ToolCall.objects.filter(status__in=audit_stream.FINAL).order_by("id"))


def test_every_record_arrives_once_through_outages_and_restarts(tenant: Any, member_client: Any,
                                                                receiver: Receiver) -> None:
    owner = member_client(tenant, Role.OWNER)
    lister = Tool.objects.get(tenant=tenant, name="list_directory")
    reader = Tool.objects.get(tenant=tenant, name="read_file")
    owner.post("/api/v1/quotas/", {"scope": "tool", "target": str(reader.pk), "per_minute": 1}, format="json")
    sink = audit_stream.sink_from(receiver.url)
    for _ in range(3):
        assert invoke(owner, lister).status_code == 200
    invoke(owner, reader, "missing.txt")  # an error result
    assert invoke(owner, reader, "missing.txt").status_code == 429  # a quota refusal
    shipper = Shipper(sink)
    assert wait_until(lambda: len(receiver.records) == 5)
    shipper.stop()

    # The receiver fails (503): the batch is retried, nothing is acknowledged, nothing lost.
    receiver.failing = True
    for _ in range(2):
        invoke(owner, lister)
    shipper = Shipper(sink)
    assert wait_until(lambda: receiver.posts >= 8)  # several refused attempts
    assert len(receiver.records) == 5
    assert AuditCursor.objects.get(sink=sink.name).last_error == f"POST {sink.name}: HTTP 503"
    shipper.stop()  # a restart while the receiver is failing

    # Then the receiver is down (connection refused) while calls go on; the shipper restarts again.
    receiver.stop()
    invoke(owner, lister)
    shipper = Shipper(audit_stream.sink_from(receiver.url))
    assert wait_until(lambda: "ConnectError" in AuditCursor.objects.get(sink=sink.name).last_error)
    shipper.stop()
    receiver.failing = False
    receiver.start()
    shipper = Shipper(audit_stream.sink_from(receiver.url))
    assert wait_until(lambda: len(receiver.records) == 8)
    invoke(owner, lister)
    assert wait_until(lambda: len(receiver.records) == 9)
    shipper.stop()

    calls = final_calls()
    uids = [r["metadata"]["uid"] for r in receiver.records]
    assert uids == [str(c.call_uid) for c in calls]  # each once, in order
    sequences = [r["metadata"]["sequence"] for r in receiver.records]
    assert sequences == sorted(sequences) and len(set(sequences)) == 9
    cursor = AuditCursor.objects.get(sink=sink.name)
    assert cursor.shipped == 9 and cursor.last_error == "" and cursor.last_id == AuditEvent.objects.latest("id").id


def test_a_record_is_ocsf_api_activity_with_who_what_and_how_it_went(tenant: Any, member_client: Any,
                                                                     receiver: Receiver) -> None:
    owner = member_client(tenant, Role.OWNER)
    lister = Tool.objects.get(tenant=tenant, name="list_directory")
    reader = Tool.objects.get(tenant=tenant, name="read_file")
    invoke(owner, lister)
    invoke(owner, reader, "nope.txt")
    sink = audit_stream.sink_from(receiver.url)
    assert audit_stream.ship_once(sink) == 2 and audit_stream.ship_once(sink) == 0
    ok, failed = receiver.records
    call = ToolCall.objects.get(tool=lister)
    assert (ok["class_uid"], ok["category_uid"], ok["type_uid"]) == (6003, 6, 600399)
    assert ok["status"] == "Success" and ok["status_id"] == 1 and ok["duration"] == call.cost_ms
    assert ok["actor"]["user"] == {"uid": str(owner.user.pk), "name": owner.user.username}
    assert ok["api"]["service"]["name"] == "list_directory" and ok["api"]["operation"] == "tools/call"
    toolhub = ok["unmapped"]["toolhub"]
    assert toolhub["tool"] == {"id": lister.pk, "name": "list_directory"} and toolhub["function"] == "list_directory"
    assert toolhub["outcome"] == "ok" and toolhub["tenant"] == "acme" and toolhub["approval"] is None
    assert failed["status"] == "Failure" and failed["status_code"] == ToolCall.objects.get(tool=reader).error_code
    assert ok["time"] <= failed["time"]


def test_nothing_is_queued_while_the_stream_is_off(tenant: Any, member_client: Any, settings: Any) -> None:
    settings.TOOLHUB_AUDIT_STREAM = ""
    owner = member_client(tenant, Role.OWNER)
    invoke(owner, Tool.objects.get(tenant=tenant, name="list_directory"))
    assert ToolCall.objects.filter(status=CallStatus.OK).count() == 1
    assert AuditEvent.objects.count() == 0


def test_file_and_syslog_sinks(tenant: Any, member_client: Any, settings: Any, tmp_path: Path) -> None:
    settings.TOOLHUB_AUDIT_STREAM = f"file:{tmp_path / 'audit.jsonl'}"
    owner = member_client(tenant, Role.OWNER)
    lister = Tool.objects.get(tenant=tenant, name="list_directory")
    invoke(owner, lister)
    invoke(owner, lister)
    file_sink = audit_stream.sink_from(settings.TOOLHUB_AUDIT_STREAM)
    assert audit_stream.ship_once(file_sink) == 2
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert [json.loads(line)["unmapped"]["toolhub"]["function"] for line in lines] == ["list_directory"] * 2

    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as collector:
        collector.bind(("127.0.0.1", port))
        collector.settimeout(10)
        syslog = audit_stream.sink_from(f"syslog://127.0.0.1:{port}")
        assert audit_stream.ship_once(syslog) == 2  # its own cursor: from the start
        messages = [collector.recv(65536).decode() for _ in range(2)]
    assert all(m.startswith("<134>1 ") and " toolhub - audit - {" in m for m in messages)
    assert json.loads(messages[0].split(" audit - ", 1)[1])["class_uid"] == 6003


def test_an_unknown_stream_target_is_refused_naming_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match="accepted: file:/path"):
        audit_stream.sink_from("kafka://broker:9092")
