"""modern_mini.py (no SDK) answers over stdio what modern_only.py (the SDK-built reference) answers: the same requests
to both, the answers compared whole but for what differs by design (the server's name, the opaque requestState, the
random part of a question that changes every round, the wording of pydantic's validation errors)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mcp_servers import MODERN_MINI, MODERN_ONLY, PYTHON

ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
ELICIT: dict[str, Any] = {"elicitation": {"form": {}}}


class Wire:
    """One server process spoken to line by line: each request's answer with the notifications sent before it."""

    def __init__(self, script: Path, *args: str) -> None:
        self.proc = subprocess.Popen([PYTHON, str(script), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.last = 0

    def ask(self, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = ELICIT,
            **meta: Any) -> list[dict[str, Any]]:
        assert self.proc.stdin and self.proc.stdout
        self.last += 1
        sent = dict(params or {})
        if caps is not None:
            sent["_meta"] = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": caps, **meta}
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.last, "method": method, "params": sent}) + "\n")
        self.proc.stdin.flush()
        got: list[dict[str, Any]] = []
        while not got or got[-1].get("id") != self.last:
            got.append(json.loads(self.proc.stdout.readline()))
        return got

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def _same(message: Any) -> Any:
    """`message` with what differs by design made equal."""
    text = json.dumps(message, sort_keys=True)
    text = text.replace('"modern-only"', '"modern-mini"')
    text = re.sub(r'"requestState": "v1\.[^"]+"', '"requestState": "v1.*"', text)
    text = re.sub(r"Still there\? \([0-9a-f]{32}\)", "Still there? (*)", text)
    text = re.sub(r"(Error executing tool \w+: 1 validation error for \w+)[^\"]*", r"\1", text)
    return json.loads(text)


def _conversation(wire: Wire) -> Iterator[list[dict[str, Any]]]:
    """What Toolhub's client (pool, runner, gateway relay) sends a 2026-only server, each answer as it comes."""
    yield wire.ask("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}}, caps=None)
    yield wire.ask("tools/list", {}, caps=None)
    yield wire.ask("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}, caps=None)
    for method in ("server/discover", "tools/list", "prompts/list", "resources/list"):
        yield wire.ask(method)
    for arguments in ({"text": "hi"}, {}, {"text": 3}):
        yield wire.ask("tools/call", {"name": "echo", "arguments": arguments})
    yield wire.ask("tools/call", {"name": "nope", "arguments": {}})
    book = {"name": "book_table", "arguments": {"restaurant": "Chez Ada"}}
    first = wire.ask("tools/call", book)
    yield first
    state = first[-1]["result"]["requestState"]
    for answer in ({"action": "accept", "content": {"people": 3}}, {"action": "decline"}, {"action": "cancel"}):
        yield wire.ask("tools/call", {**book, "inputResponses": {"__main__:ask_people": answer}, "requestState": state})
    # An answer without the round's state, or to another question, is discarded and the question asked again.
    yield wire.ask("tools/call", {**book, "inputResponses": {"__main__:ask_people": {"action": "accept",
                                                                                    "content": {"people": 3}}}})
    other = {**book, "arguments": {"restaurant": "Chez Bob"}}
    yield wire.ask("tools/call", {**other, "inputResponses": {"__main__:ask_people": {"action": "decline"}},
                                  "requestState": state})
    yield wire.ask("tools/call", book, caps={})
    yield wire.ask("tools/call", {"name": "bookings", "arguments": {}})
    summarize = {"name": "summarize", "arguments": {"text": "a long story"}}
    yield wire.ask("tools/call", summarize)
    asked = wire.ask("tools/call", summarize, caps={"sampling": {}})
    yield asked
    completion = {"role": "assistant", "model": "m1", "content": {"type": "text", "text": "Five words."}}
    yield wire.ask("tools/call", {**summarize, "inputResponses": {"__main__:ask_model": completion},
                                  "requestState": asked[-1]["result"]["requestState"]}, caps={"sampling": {}})
    yield wire.ask("tools/call", {"name": "roots", "arguments": {}})
    roots = wire.ask("tools/call", {"name": "roots", "arguments": {}}, caps={"roots": {"listChanged": True}})
    yield roots
    yield wire.ask("tools/call", {"name": "roots", "arguments": {}, "requestState": roots[-1]["result"]["requestState"],
                                  "inputResponses": {"__main__:ask_roots": {"roots": [{"uri": "file:///srv/w"}]}}},
                   caps={"roots": {"listChanged": True}})
    forever = wire.ask("tools/call", {"name": "ask_forever", "arguments": {}})
    yield forever
    yield wire.ask("tools/call", {"name": "ask_forever", "arguments": {}, "requestState": forever[-1]["result"][
        "requestState"], "inputResponses": {"__main__:ask_again": {"action": "accept", "content": {"ok": True}}}})
    yield wire.ask("tools/call", {"name": "slow", "arguments": {"steps": 3}}, progressToken=7)
    yield wire.ask("tools/call", {"name": "listings", "arguments": {}})
    for method, params in (("prompts/get", {"name": "booking", "arguments": {}}),
                           ("resources/read", {"uri": "booking://table"})):
        question = wire.ask(method, params)
        yield question
        for answer in ({"action": "accept", "content": {"people": 5}}, {"action": "decline"}):
            yield wire.ask(method, {**params, "inputResponses": {"people": answer},
                                    "requestState": question[-1]["result"]["requestState"]})
        yield wire.ask(method, {**params, "inputResponses": {"people": {"action": "decline"}},
                                "requestState": "not-a-state"})
        yield wire.ask(method, params, caps={})
    yield wire.ask("ping")


@pytest.fixture
def wires() -> Iterator[tuple[Wire, Wire]]:
    sdk, mini = Wire(MODERN_ONLY), Wire(MODERN_MINI)
    try:
        yield sdk, mini
    finally:
        sdk.close()
        mini.close()


def test_modern_mini_answers_what_the_sdk_built_server_answers(wires: tuple[Wire, Wire]) -> None:
    sdk, mini = wires
    compared = 0
    for by_sdk, by_mini in zip(_conversation(sdk), _conversation(mini), strict=True):
        assert _same(by_mini) == _same(by_sdk)
        compared += 1
    assert compared >= 40  # every step of the conversation answered by both


def test_modern_mini_refuses_a_revision_it_was_not_told_to_speak() -> None:
    mini = Wire(MODERN_MINI, "--supported", "2099-01-01", "--list-ttl-ms", "60000")
    try:
        (refused,) = mini.ask("server/discover")
        assert refused["error"]["code"] == -32022
        assert refused["error"]["data"] == {"supported": ["2099-01-01"], "requested": "2026-07-28"}
    finally:
        mini.close()
    hinted = Wire(MODERN_MINI, "--list-ttl-ms", "60000")
    try:
        assert hinted.ask("tools/list")[-1]["result"]["ttlMs"] == 60000
    finally:
        hinted.close()
