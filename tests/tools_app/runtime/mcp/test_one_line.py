"""A stdio tools/call sent as one line past the SDK's dispatcher (oneline.OneLine) against the same call through the
SDK's ClientSession: the same results back and the same lines out (as the server read them), for a 2026-07-28 SDK
server (one_post.py's tools over stdio) and a handshake-era server (fidelity.py: progress, elicitation, sampling)."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mcp_servers import HERE, MINI
from tests.tools_app.runtime.mcp.conftest import Specs, pool_maker
from tools_app.runtime.mcp import ServerSpec, SessionPool
from tools_app.runtime.mcp.client_requests import ClientRequests
from tools_app.runtime.mcp.oneline import OneLine

TEE = HERE / "stdin_tee.py"
ONE_POST = HERE / "one_post.py"
FIDELITY = HERE / "fidelity.py"


def comparable(result: Any) -> dict[str, Any]:
    out = asdict(result)
    out.pop("cost_ms")
    return out


def renumbered(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines with their JSON-RPC ids (and progress tokens, which the SDK takes from the id) numbered in order of
    first use, so a request and the answer to it keep one number. The two paths' id counters need not stay equal (a
    warm-up on a loaded machine may send one more request on one path); every other byte, and which line answers
    which, must."""
    numbers: dict[Any, int] = {}
    for line in lines:
        if "id" in line:
            line["id"] = numbers.setdefault(line["id"], len(numbers))
        meta = (line.get("params") or {}).get("_meta") or {}
        if "progressToken" in meta:
            meta["progressToken"] = numbers.setdefault(meta["progressToken"], len(numbers))
    return lines


class Pair:
    """The SDK's path and the one-line path, each its own pool and server process, each server's input kept."""

    def __init__(self, make_pool: Any, specs: Specs, tmp_path: Path, script: Path, *args: str, **config: Any) -> None:
        self.sdk: SessionPool = make_pool(one_post=False)
        self.fast: SessionPool = make_pool()
        self.seen = {name: tmp_path / f"{name}.jsonl" for name in ("sdk", "fast")}
        # Each its own tool id: the stdio era a tool revision answered in is remembered per process (connection.py),
        # so the two paths meet the same server the same way, probed or remembered.
        self.specs: dict[str, ServerSpec] = {
            name: specs.local(None, tool_id=tool_id, args=[str(TEE), str(path), str(script), *args], **config)
            for tool_id, (name, path) in enumerate(self.seen.items(), start=1)}
        for name, pool in (("sdk", self.sdk), ("fast", self.fast)):
            assert pool.call(self.specs[name], self.warm[0], self.warm[1]).success
        self.lines()

    warm: tuple[str, dict[str, Any]] = ("echo", {"text": "warm"})

    def lines(self) -> dict[str, list[dict[str, Any]]]:
        """What each server read since last asked (and the files emptied)."""
        out = {}
        for name, path in self.seen.items():
            # A requestState (sealed by the server with a fresh nonce each time) is masked, every other byte kept.
            text = re.sub(rb'"requestState":"[^"]*"', b'"requestState":"<sealed>"', path.read_bytes())
            out[name] = [json.loads(line) for line in text.splitlines() if line.strip()]
            path.write_bytes(b"")
        return out

    def compared(self) -> dict[str, list[dict[str, Any]]]:
        """`lines()` with each path's JSON-RPC ids renumbered (see `renumbered`)."""
        return {name: renumbered(got) for name, got in self.lines().items()}

    def both(self, function: str, arguments: dict[str, Any], **kwargs: Any) -> tuple[Any, list[dict[str, Any]]]:
        """One call each way: the SDK's result and lines must equal the one-line path's, which are returned."""
        before = self.fast.stats()
        expected = self.sdk.call(self.specs["sdk"], function, arguments, **kwargs)
        got = self.fast.call(self.specs["fast"], function, arguments, **kwargs)
        lines = self.compared()
        assert comparable(got) == comparable(expected)
        assert lines["fast"] == lines["sdk"]
        assert self.fast.stats()["sessions_opened"] == before["sessions_opened"]
        return got, lines["fast"]

    def sender(self) -> Any:
        """The sender the fast pool's warm session uses (checked on the pool's loop)."""
        conn = self.fast._conns[self.specs["fast"].key]
        return conn._one_post()


class ModernPair(Pair):
    warm = ("echo", {"text": "warm"})


class HandshakePair(Pair):
    warm = ("bare", {})


@pytest.fixture(scope="module")
def _modern_kept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModernPair]:
    """One modern pair (two pools, two servers, two tees: ~1.5 s of CPU to start) for the module's tests that call
    both paths alike. Each such test still sends its calls on warm sessions with nothing unread, as a new pair's
    first test did: the two paths get the same calls in the same order, and every line compared is what it would be
    on a new pair but for the JSON-RPC ids, which `Pair.compared` renumbers."""
    marker = uuid.uuid4().hex
    with pool_maker(marker) as make:
        yield ModernPair(make, Specs(marker), tmp_path_factory.mktemp("one-line"), ONE_POST, "--transport", "stdio")


@pytest.fixture
def modern(_modern_kept: ModernPair) -> ModernPair:
    """The module's modern pair, for a test that calls both paths alike (see `_modern_kept`)."""
    _modern_kept.lines()  # nothing left unread by an earlier test
    return _modern_kept


@pytest.fixture
def modern_own(make_pool: Any, specs: Specs, tmp_path: Path) -> ModernPair:
    """A new modern pair, for a test that calls one path only (the shared pair's paths must get the same calls)."""
    return ModernPair(make_pool, specs, tmp_path, ONE_POST, "--transport", "stdio")


@pytest.fixture
def handshake(make_pool: Any, specs: Specs, tmp_path: Path) -> HandshakePair:
    return HandshakePair(make_pool, specs, tmp_path, FIDELITY, sampling=True)


def test_the_fast_pool_sends_past_the_dispatcher_and_the_other_does_not(modern: ModernPair) -> None:
    assert isinstance(modern.sender(), OneLine)
    assert modern.sdk._conns[modern.specs["sdk"].key]._one_post() is None


def test_a_plain_call_is_the_same_line_and_result(modern: ModernPair) -> None:
    result, lines = modern.both("echo", {"text": "hello"})
    assert result.success and result.text == "hello"
    assert len(lines) == 1 and lines[0]["method"] == "tools/call"
    meta = lines[0]["params"]["_meta"]
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "toolhub"


def test_is_error_and_structured_content_alike(modern: ModernPair) -> None:
    failed, _ = modern.both("fail", {"why": "nope"})
    assert not failed.success and "Error executing tool fail" in (failed.error or ""), failed
    point, _ = modern.both("point", {"x": 1, "y": 2})
    assert point.success and point.data == {"x": 1, "y": 2}


def test_logs_and_progress_reach_the_same_callbacks(modern: ModernPair) -> None:
    result, _ = modern.both("chatty", {"steps": 3})
    logs = [entry["data"] for entry in result.meta.get("logs", [])]
    assert logs == ["working on 0", "working on 1", "working on 2", {"done": 3}]
    progress: dict[str, list[Any]] = {"sdk": [], "fast": []}
    sdk = modern.sdk.call(modern.specs["sdk"], "chatty", {"steps": 2}, on_progress=lambda *a: progress["sdk"].append(a))
    fast = modern.fast.call(modern.specs["fast"], "chatty", {"steps": 2},
                            on_progress=lambda *a: progress["fast"].append(a))
    raw = modern.lines()
    assert raw["fast"][0]["params"]["_meta"]["progressToken"] == raw["fast"][0]["id"]
    lines = {name: renumbered(got) for name, got in raw.items()}
    assert comparable(fast) == comparable(sdk)
    assert lines["fast"] == lines["sdk"]
    assert progress["fast"] == progress["sdk"] == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]


def test_input_required_rounds_send_the_same_answers(modern: ModernPair) -> None:
    answers = ClientRequests(elicit=lambda _params: {"action": "accept", "content": {"people": 3}})
    result, lines = modern.both("book_table", {"restaurant": "Chez Ada"}, client_requests=answers)
    assert result.success and result.data == {"booked": True, "restaurant": "Chez Ada", "people": 3}, result
    assert len(lines) == 2 and "inputResponses" in lines[1]["params"] and "requestState" in lines[1]["params"]


def test_an_unknown_tool_and_bad_arguments_alike(modern: ModernPair) -> None:
    unknown, _ = modern.both("no_such_tool", {})
    assert not unknown.success, unknown
    bad, lines = modern.both("echo", {"text": 5})
    assert not bad.success and lines == [], bad  # refused before sending, both ways


def test_a_handshake_server_s_progress_elicitation_and_sampling_alike(handshake: HandshakePair) -> None:
    assert isinstance(handshake.sender(), OneLine)
    forecast, _ = handshake.both("forecast", {"city": "Lyon"})
    assert forecast.success and forecast.data == {"city": "Lyon", "high_c": 21.5}
    exploded, _ = handshake.both("explode", {"why": "x"})
    assert not exploded.success
    progress: dict[str, list[Any]] = {"sdk": [], "fast": []}
    for name, pool in (("sdk", handshake.sdk), ("fast", handshake.fast)):
        assert pool.call(handshake.specs[name], "countdown", {}, on_progress=lambda *a, n=name: progress[n].append(a)
                         ).success
    assert progress["fast"] == progress["sdk"] == [(1.0, 3.0, "three"), (2.0, 3.0, "two"), (3.0, 3.0, "one")]
    asked = ClientRequests(elicit=lambda _params: {"action": "accept", "content": {"city": "Lyon"}},
                           sample=lambda _params: {"role": "assistant", "model": "m",
                                                   "content": {"type": "text", "text": "Bonjour"}})
    handshake.lines()
    city, lines = handshake.both("ask", {}, client_requests=asked)
    assert city.success and "Lyon" in (city.text or ""), city
    assert [line.get("method") for line in lines] == ["tools/call", None]  # the call, then the answer to its question
    model, _ = handshake.both("think", {}, client_requests=asked)
    assert model.success and "Bonjour" in (model.text or ""), model
    declined, _ = handshake.both("ask", {})
    assert not declined.success and "declined" in (declined.error or ""), declined


def test_concurrent_calls_each_get_their_own_answer(modern_own: ModernPair) -> None:
    results: dict[int, Any] = {}

    def one(i: int) -> None:
        results[i] = modern_own.fast.call(modern_own.specs["fast"], "echo", {"text": f"n{i}"})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {i: r.text for i, r in results.items()} == {i: f"n{i}" for i in range(16)}
    assert all(r.success for r in results.values())


def test_a_server_killed_mid_call_fails_the_call_as_the_sdk_path_does(make_pool: Any, specs: Specs) -> None:
    outcomes = {}
    for name, pool in (("sdk", make_pool(one_post=False)), ("fast", make_pool())):
        spec = specs.local(MINI, tool_id=7 if name == "sdk" else 8)
        assert pool.call(spec, "get_inventory", {"sku": "A"}).success
        pid = pool._conns[spec.key].pid
        assert pid is not None
        timer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
        timer.start()
        outcomes[name] = pool.call(spec, "slow", {"seconds": 8})
        timer.join()
        assert pool.call(spec, "get_inventory", {"sku": "A"}).success  # a fresh session takes the next call
    assert not outcomes["fast"].success
    assert (outcomes["fast"].error_code, outcomes["fast"].error_reason) == (
        outcomes["sdk"].error_code, outcomes["sdk"].error_reason)
