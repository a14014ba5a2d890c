"""Toolhub's client against a server that speaks only MCP 2026-07-28 (stateless, refuses the handshake), LOCAL and
REMOTE: discovery, calls, input_required answered by the call's own handlers, version refusals, list cache hints.

REMOTE is the SDK-built modern_only.py (one process for the module); LOCAL is modern_mini.py, its stdio answers
without the SDK's ~1.2 s of CPU a start (test_modern_mini.py compares the two), but where the SDK's own stdio server
is the point (its refusal of a revision; test_stdio_discover.py for its discovery)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from core.codes import ApiCode
from tests.fixtures.mcp_servers import CLIENT_PROBE, MODERN_MINI, MODERN_ONLY, http_server
from tests.tools_app.runtime.mcp.conftest import Specs
from tools_app.runtime.errors import ProtocolVersionUnsupported
from tools_app.runtime.mcp import LocalSpec, ServerSpec, SessionPool
from tools_app.runtime.mcp.client_requests import ClientRequestRefused, ClientRequests


@pytest.fixture(scope="module")
def modern_url() -> Iterator[str]:
    with http_server(MODERN_ONLY, extra_args=("--list-ttl-ms", "60000")) as url:
        yield url


@pytest.fixture(params=["local", "remote"])
def modern(request: pytest.FixtureRequest, specs: Specs) -> ServerSpec:
    if request.param == "local":
        return specs.local(MODERN_MINI, args=[str(MODERN_MINI), "--list-ttl-ms", "60000"])
    return specs.remote(request.getfixturevalue("modern_url"))


def test_a_2026_only_server_is_discovered_and_says_its_revision(pool: SessionPool, modern: ServerSpec) -> None:
    found = pool.probe(modern)
    assert found.protocol_version == "2026-07-28"
    name = "modern-mini" if isinstance(modern.target, LocalSpec) else "modern-only"
    assert (found.server_name, found.server_version) == (name, "2.0.0")
    assert {"echo", "book_table", "summarize", "roots"} <= {f.name for f in found.functions}


def test_a_2026_only_server_is_called_through_the_warm_pool(pool: SessionPool, modern: ServerSpec) -> None:
    first = pool.call(modern, "echo", {"text": "hello"})
    second = pool.call(modern, "echo", {"text": "again"})
    assert first.success and first.text == "hello", first
    assert second.success and second.text == "again", second
    assert pool.stats()["sessions_opened"] == 1  # the second call reused the warm connection


def test_a_2025_server_still_gets_the_handshake(pool: SessionPool, specs: Specs) -> None:
    found = pool.probe(specs.local(CLIENT_PROBE))
    assert found.protocol_version == "2025-11-25"
    assert found.server_name == "client-probe"


def test_progress_of_a_2026_call_reaches_the_caller(pool: SessionPool, modern: ServerSpec) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    result = pool.call(modern, "slow", {"steps": 3}, on_progress=lambda p, t, m: seen.append((p, t, m)))
    assert result.success, result.error
    assert [p for p, _t, _m in seen] == [1, 2, 3]


def test_an_input_request_goes_to_the_calls_own_handler_and_the_answer_back(
    pool: SessionPool, modern: ServerSpec,
) -> None:
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"people": 4}}

    result = pool.call(modern, "book_table", {"restaurant": "Chez Ada"}, client_requests=ClientRequests(elicit=elicit))
    assert result.success, result.error
    assert result.data == {"booked": True, "restaurant": "Chez Ada", "people": 4}
    assert asked[0]["message"] == "How many people for Chez Ada?"
    assert asked[0]["requestedSchema"]["required"] == ["people"]


def test_a_declined_question_reaches_the_server_as_declined(pool: SessionPool, modern: ServerSpec) -> None:
    answers = ClientRequests(elicit=lambda _p: {"action": "decline"})
    result = pool.call(modern, "book_table", {"restaurant": "Chez Ada"}, client_requests=answers)
    assert result.success and result.data == {"booked": False, "action": "decline"}, result


def test_nobody_to_ask_ends_the_call_with_the_reason(pool: SessionPool, modern: ServerSpec) -> None:
    result = pool.call(modern, "book_table", {"restaurant": "Chez Ada"})
    assert result.error_code == "BUSINESS_ERROR" and result.meta.get("input_declined") is True, result
    assert "nobody can answer" in (result.error or "")


def test_a_handlers_refusal_ends_the_call_with_its_reason(pool: SessionPool, modern: ServerSpec) -> None:
    def refuse(_params: dict[str, Any]) -> dict[str, Any]:
        raise ClientRequestRefused("declined: the person is away")

    result = pool.call(modern, "book_table", {"restaurant": "x"}, client_requests=ClientRequests(elicit=refuse))
    assert result.error_code == "BUSINESS_ERROR" and "the person is away" in (result.error or ""), result


def test_sampling_is_asked_only_where_the_tool_allows_it(pool: SessionPool, specs: Specs, modern_url: str) -> None:
    answers = ClientRequests(sample=lambda _p: {"role": "assistant", "model": "m1",
                                                "content": {"type": "text", "text": "five words exactly here ok"}})
    off = pool.call(specs.remote(modern_url), "summarize", {"text": "long"}, client_requests=answers)
    # Toolhub did not offer sampling, so the server refuses the call itself (a JSON-RPC error, not a broken session).
    assert off.error_code == "BUSINESS_ERROR" and off.meta.get("jsonrpc_code"), off
    on = pool.call(specs.remote(modern_url, tool_id=101, sampling=True), "summarize", {"text": "long"},
                   client_requests=answers)
    assert on.success and on.data == {"summary": "five words exactly here ok", "model": "m1"}, on


def test_roots_come_from_the_tools_roots(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local(MODERN_MINI, roots=["/srv/work"])
    result = pool.call(spec, "roots", {})
    assert result.success and result.data == {"roots": ["file:///srv/work"]}, result


def test_rounds_are_capped_with_a_typed_error(make_pool: Any, specs: Specs) -> None:
    pool = make_pool(input_rounds=3)
    result = pool.call(specs.local(MODERN_MINI), "ask_forever", {},
                       client_requests=ClientRequests(elicit=lambda _p: {"action": "accept", "content": {"ok": True}}))
    assert result.error_code == "EXECUTION_ERROR", result
    assert result.meta["error_type"] == ApiCode.INPUT_ROUNDS_EXCEEDED and result.meta["max_rounds"] == 3


def test_a_revision_nobody_speaks_is_a_typed_refusal_naming_it(pool: SessionPool, specs: Specs) -> None:
    with http_server(MODERN_ONLY, extra_args=("--supported", "2099-01-01")) as url:
        with pytest.raises(ProtocolVersionUnsupported) as remote:
            pool.probe(specs.remote(url))
    with pytest.raises(ProtocolVersionUnsupported) as local:
        pool.probe(specs.local(MODERN_ONLY, args=[str(MODERN_ONLY), "--supported", "2099-01-01"]))
    for refused in (remote.value, local.value):
        assert refused.code == ApiCode.PROTOCOL_VERSION_UNSUPPORTED
        assert refused.details["supported"] == ["2099-01-01"]
        assert "2026-07-28" in refused.details["toolhub"] and "2025-11-25" in refused.details["toolhub"]
        assert "2099-01-01" in refused.message


def test_the_list_cache_hint_spares_relisting_until_it_expires(pool: SessionPool, specs: Specs) -> None:
    spec = specs.local(MODERN_MINI, args=[str(MODERN_MINI), "--list-ttl-ms", "60000"])
    pool.discover(spec)  # connects: one tools/list
    pool.discover(spec)  # the listing made while connecting
    pool.discover(spec)  # within ttlMs: no request
    assert pool.call(spec, "listings", {}).data == {"tools_list": 1}
    unhinted = specs.local(MODERN_MINI, tool_id=2)
    pool.discover(unhinted)
    pool.discover(unhinted)
    pool.discover(unhinted)
    assert pool.call(unhinted, "listings", {}).data == {"tools_list": 3}


def test_a_restarted_2026_server_answers_on_the_same_warm_connection(pool: SessionPool, specs: Specs) -> None:
    from tests.fixtures.mcp_servers import free_port

    port = free_port()
    with http_server(MODERN_ONLY, port=port) as url:
        spec = specs.remote(url)
        assert pool.call(spec, "echo", {"text": "before"}).success
    with http_server(MODERN_ONLY, port=port):
        after = pool.call(spec, "echo", {"text": "after"})
    assert after.success and after.text == "after", after
    assert pool.stats()["sessions_opened"] == 1  # no session to lose: nothing to reopen
