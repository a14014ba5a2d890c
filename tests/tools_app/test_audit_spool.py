"""A call that ran keeps its audit row when PostgreSQL goes away at the INSERT: the row is spooled (redacted),
the caller gets the result, and a replay stores it once.

A database outage cannot be staged inside the test database, so the INSERT of the audit row is refused at the
SQL level (a connection execute wrapper raising django.db.OperationalError, as a dropped connection does);
everything else (the MCP server, the tool call, the spool files, the replays) is real.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection

from core import metrics
from tests.fixtures.mcp_servers import MINI
from tests.tools_app.discovered import Discovered
from tools_app.models import CallStatus, ToolCall
from tools_app.services import audit_spool
from tools_app.tasks import replay_audit_spool
from tools_app.wiring.pool import pool

pytestmark = pytest.mark.django_db(transaction=True)
CANARY = "canary-5d1e-spool-secret"


@pytest.fixture(autouse=True)
def spool_dir(settings: Any, tmp_path: Path) -> Path:
    settings.TOOLHUB_AUDIT_SPOOL_DIR = tmp_path / "spool"
    audit_spool._pending = None
    return tmp_path / "spool"


@pytest.fixture(scope="module")
def discovered() -> Discovered:
    return Discovered()


@pytest.fixture
def inventory(api: Any, discovered: Discovered) -> Iterator[int]:
    resp = api.post("/api/v1/tools/", {"name": "inventory", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(MINI)], "env": {"API_KEY": CANARY},
        "startup_timeout_s": 20}}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert "get_inventory" in [f["name"] for f in discovered.refresh(api, tool_id)["functions"]]  # its server listed once per module
    yield tool_id
    pool().close_all()


class AuditInsertDown:
    """Refuses the next `times` INSERTs of an audit row as a lost PostgreSQL connection would."""

    def __init__(self, times: int = 1) -> None:
        self.left = times

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.left and sql.startswith('INSERT INTO "tools_app_toolcall"'):
            self.left -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)


def database_down(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    raise OperationalError("connection refused")


def invoke_during_outage(api: Any, tool_id: int, sku: str) -> Any:
    with connection.execute_wrapper(AuditInsertDown()):
        return api.post(f"/api/v1/tools/{tool_id}/invoke/",
                        {"function": "get_inventory", "arguments": {"sku": sku}}, format="json")


def test_a_call_that_ran_answers_its_result_and_its_row_is_replayed_once(api: Any, tenant: Any, inventory: int,
                                                                         spool_dir: Path) -> None:
    before = ToolCall.objects.count()
    counted = metrics.TOOL_CALLS.labels(str(tenant.pk), "inventory", "get_inventory", CallStatus.OK)
    calls_before = counted._value.get()
    resp = invoke_during_outage(api, inventory, "DEMO-001")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["success"] is True and body["call_id"] is None
    assert body["audit"]["spooled"] is True
    uid = body["audit"]["call_uid"]
    assert ToolCall.objects.count() == before  # nothing stored yet
    assert counted._value.get() == calls_before + 1  # counted once, when answered

    files = audit_spool.spooled_files()
    assert [f.name for f in files] == [f"{uid}.json"]
    record = json.loads(files[0].read_text())
    assert record["function"] == "get_inventory" and record["status"] == CallStatus.OK
    assert record["arguments"] == {"sku": "DEMO-001"} and record["tool_id"] == inventory
    assert record["result_size"] > 0

    first = replay_audit_spool()  # the beat task
    assert first["inserted"] == 1 and first["corrupt"] == [] and first["left"] == 0
    row = ToolCall.objects.get(call_uid=uid)
    assert (row.status, row.function, row.tool_id, row.result_excerpt) == (
        CallStatus.OK, "get_inventory", inventory, record["result_excerpt"])
    assert row.created_at.isoformat() == record["created_at"]
    assert audit_spool.spooled_files() == []  # deleted once committed

    second = audit_spool.replay()
    assert second.inserted == 0 and ToolCall.objects.filter(call_uid=uid).count() == 1
    assert counted._value.get() == calls_before + 1  # a replay does not count it again


def test_the_spooled_row_holds_no_secret(api: Any, inventory: int, spool_dir: Path) -> None:
    resp = invoke_during_outage(api, inventory, CANARY)  # the tool's secret sent as an argument
    assert resp.status_code == 200, resp.content
    assert CANARY.encode() not in resp.content
    [path] = audit_spool.spooled_files()
    text = path.read_text()
    assert CANARY not in text
    assert json.loads(text)["arguments"]["sku"] != CANARY
    assert audit_spool.replay().inserted == 1
    assert not ToolCall.objects.filter(arguments__sku=CANARY).exists()


def test_a_replay_of_a_row_already_stored_inserts_nothing_and_clears_the_file(api: Any, inventory: int,
                                                                              spool_dir: Path) -> None:
    invoke_during_outage(api, inventory, "DEMO-001")
    [path] = audit_spool.spooled_files()
    kept = path.read_text()
    assert audit_spool.replay().inserted == 1
    path.write_text(kept)  # as if a replay committed its row, then stopped before deleting the file
    again = audit_spool.replay()
    assert (again.inserted, again.already) == (0, 1)
    assert ToolCall.objects.filter(call_uid=json.loads(kept)["call_uid"]).count() == 1
    assert audit_spool.spooled_files() == []


def test_the_next_successful_audit_write_replays_the_spool(api: Any, inventory: int, spool_dir: Path) -> None:
    uid = invoke_during_outage(api, inventory, "DEMO-001").json()["audit"]["call_uid"]
    resp = api.post(f"/api/v1/tools/{inventory}/invoke/",
                    {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}, format="json")
    assert resp.status_code == 200 and resp.json()["call_id"] is not None
    assert ToolCall.objects.filter(call_uid=uid).count() == 1
    assert audit_spool.spooled_files() == []


def test_a_replay_during_the_outage_leaves_the_file(api: Any, inventory: int, spool_dir: Path) -> None:
    invoke_during_outage(api, inventory, "DEMO-001")
    with connection.execute_wrapper(database_down), pytest.raises(CommandError, match="1 spooled row"):
        call_command("replay_audit_spool")
    assert len(audit_spool.spooled_files()) == 1
    assert audit_spool.replay().inserted == 1


def test_a_corrupt_spool_file_is_moved_aside_and_reported(api: Any, inventory: int, spool_dir: Path,
                                                          capsys: Any) -> None:
    invoke_during_outage(api, inventory, "DEMO-001")
    spool_dir.joinpath("0-broken.json").write_text('{"function": "get_inv')  # a half-written file
    spool_dir.joinpath("1-alien.json").write_text('{"tenant_id": 1, "no_such_field": 2}')
    call_command("replay_audit_spool")
    out = capsys.readouterr()
    assert "inserted 1" in out.out
    assert "0-broken.json" in out.err and "1-alien.json" in out.err
    assert sorted(p.name for p in (spool_dir / "corrupt").iterdir()) == ["0-broken.json", "1-alien.json"]
    assert (spool_dir / "corrupt" / "0-broken.json").read_text() == '{"function": "get_inv'  # kept as it was
    assert audit_spool.spooled_files() == []


def test_a_refused_call_during_the_outage_is_still_a_503(api: Any, inventory: int, spool_dir: Path) -> None:
    # It did not run, so there is nothing to keep but the refusal; the caller is told to retry.
    with connection.execute_wrapper(AuditInsertDown()):
        resp = api.post(f"/api/v1/tools/{inventory}/invoke/",
                        {"function": "no_such_function", "arguments": {}}, format="json")
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "service_unavailable"
    assert audit_spool.spooled_files() == []


def test_a_new_process_replays_what_an_earlier_one_spooled(api: Any, inventory: int, spool_dir: Path) -> None:
    uid = invoke_during_outage(api, inventory, "DEMO-001").json()["audit"]["call_uid"]
    audit_spool._pending = None  # as in a process started after the one that spooled
    resp = api.post(f"/api/v1/tools/{inventory}/invoke/",
                    {"function": "get_inventory", "arguments": {"sku": "DEMO-001"}}, format="json")
    assert resp.status_code == 200 and resp.json()["call_id"] is not None
    assert ToolCall.objects.filter(call_uid=uid).count() == 1


def test_a_row_whose_tool_was_deleted_meanwhile_is_kept_without_it(api: Any, inventory: int,
                                                                   spool_dir: Path) -> None:
    uid = invoke_during_outage(api, inventory, "DEMO-001").json()["audit"]["call_uid"]
    assert api.delete(f"/api/v1/tools/{inventory}/").status_code == 204
    assert audit_spool.replay().inserted == 1
    row = ToolCall.objects.get(call_uid=uid)
    assert (row.tool_id, row.tool_name) == (None, "inventory")  # as on_delete=SET_NULL leaves a stored row


def test_a_row_whose_tenant_was_deleted_meanwhile_is_moved_aside(api: Any, tenant: Any, inventory: int,
                                                                 spool_dir: Path) -> None:
    invoke_during_outage(api, inventory, "DEMO-001")
    [path] = audit_spool.spooled_files()
    record = json.loads(path.read_text())
    record["tenant_id"] = tenant.pk + 10_000  # no such tenant
    path.write_text(json.dumps(record))
    report = audit_spool.replay()
    assert report.inserted == 0 and [Path(p).name for p in report.rejected] == [path.name]
    assert (spool_dir / "rejected" / path.name).exists() and audit_spool.spooled_files() == []
