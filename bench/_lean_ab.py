"""config.asgi's application with branch h-gwlean's cuts of a warm gateway call turned off for the requests that
carry `x-bench-lean-off`: bench/gateway_eras.py `--ab-lean` sends one client of each era with the cuts (`2025`,
`2026`) and one without (`2025old`, `2026old`), in turns, to one gateway process, and counts each kind's CPU per call.
The bench's calls are sequential (one request in flight), so swapping the code per request is exact. What "off"
puts back is the code before the cuts, kept here:

- the audit INSERT's values prepared by each field's own chain (`get_db_prep_save(pre_save(...))`), not by the
  statement's preparers (tools_app.services.audit._preparer);
- the call's arguments checked against the pool's live schema as well as the stored one, even when the two are the
  same content (tools_app.runtime.schemas `_FITTED`).

The worker job of each call (`fastcall._job`: the checks, the upstream call, the audit row, the rendering) is timed in
thread CPU per mode, in the timed phase's turns (kinds interleaved call by call, so a drifting VM weighs on both
alike): GET /__bench_lean__ gives {"on"|"off": [ms of each job]}; gateway_eras.py prints their mean and median.

Nothing here is imported by Toolhub.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from django.db import connections

from bench._common import send_json
from config.asgi import application as toolhub

HEADER = b"x-bench-lean-off"
PATH = "/__bench_lean__"
_saved: dict[str, Any] = {}
_mode = {"off": False}
_totals: dict[str, list[float]] = {}  # mode -> each job's thread CPU (ms)
_lock = threading.Lock()


def _full_chain(field: Any, connection: Any) -> Any:
    def full(call: Any, value: Any) -> Any:
        return field.get_db_prep_save(field.pre_save(call, True), connection=connection)
    return full


def _audit_preparers(off: bool) -> None:
    from tools_app.services import audit

    connection = connections["default"]
    key = (connection.alias, connection.vendor)
    statement = audit._insert_statement(connection)
    if statement is None:
        return
    if "audit" not in _saved:
        sql, fields, returning, preparers = statement
        _saved["audit"] = (statement, (sql, fields, returning, [_full_chain(f, connection) for f in fields]))
    lean, old = _saved["audit"]
    audit._INSERTS[key] = old if off else lean


def _checked_every_time(schema: Any, arguments: Any) -> None:
    """validate_arguments before the cut: every call checks (no memo of what fitted)."""
    from tools_app.runtime import schemas
    from tools_app.runtime.errors import InvalidParams

    schema = schema or {"type": "object"}
    if not isinstance(arguments, dict):
        raise InvalidParams("arguments must be a JSON object")
    schemas._check(schema, schemas.canonical_json(schema), arguments)


def _argument_checks(off: bool) -> None:
    from tools_app.runtime import schemas
    from tools_app.runtime.mcp import pool
    from tools_app.services import invoke

    check = _checked_every_time if off else schemas.validate_arguments
    setattr(invoke, "validate_arguments", check)  # noqa: B010 - a patch by name, as bench/_cpu_split.py's
    setattr(pool, "validate_arguments", check)  # noqa: B010


def _set(off: bool) -> None:
    _mode["off"] = off
    _audit_preparers(off)
    _argument_checks(off)


def _install() -> None:
    from agents_app.gateway import fastcall

    job = fastcall._job

    @functools.wraps(job)
    def timed(*args: Any, **kwargs: Any) -> Any:
        mode = "off" if _mode["off"] else "on"
        started = time.thread_time()
        try:
            return job(*args, **kwargs)
        finally:
            took = (time.thread_time() - started) * 1000
            with _lock:
                _totals.setdefault(mode, []).append(took)

    fastcall._job = timed


_install()


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == PATH:
        with _lock:
            await send_json(send, {mode: list(took) for mode, took in _totals.items()})
        return
    if scope["type"] == "http" and scope["path"].startswith("/mcp/"):
        _set(any(name == HEADER for name, _ in scope.get("headers", [])))
    await toolhub(scope, receive, send)
