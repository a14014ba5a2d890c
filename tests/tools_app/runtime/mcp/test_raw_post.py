"""A warm 2026-07-28 REMOTE tools/call sent from the calling thread (rawpost.RawPost, TOOLHUB_MCP_RAW_POST on) against
the same call through the pool's loop (post.OnePost, the setting off): the same results back, field by field, and the
same requests (headers and body, as the server received them) out, for a real SDK server answering with JSON bodies
and with SSE streams; and the calls that must keep the loop's path (OAuth, progress) do."""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest

from tests.fixtures.mcp_servers import HERE, http_server
from tests.tools_app.runtime.mcp.conftest import Specs
from tools_app.runtime.mcp import ServerSpec, SessionPool
from tools_app.runtime.mcp.client_requests import ClientRequests
from tools_app.runtime.mcp.spec import RemoteSpec

ONE_POST = HERE / "one_post.py"


@pytest.fixture(scope="module", params=["json", "sse"])
def url_mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


@pytest.fixture(scope="module")
def url(url_mode: str) -> Iterator[str]:
    with http_server(ONE_POST, extra_args=("--json",) if url_mode == "json" else ()) as found:
        yield found


def seen(url: str) -> list[dict[str, Any]]:
    """The POSTs the server received since last asked (and it forgets them); a requestState (sealed by the server
    with a fresh nonce each time) is masked in the body, every other byte kept."""
    with urllib.request.urlopen(url.removesuffix("/mcp") + "/seen", timeout=5) as answer:
        posts: list[dict[str, Any]] = json.loads(answer.read())
    for post in posts:
        post["body"] = re.sub(r'"requestState":"[^"]*"', '"requestState":"<sealed>"', post["body"])
    return posts


def comparable(result: Any) -> dict[str, Any]:
    out = asdict(result)
    out.pop("cost_ms")
    return out


class Pair:
    """The loop's path (raw_post off) and the calling thread's (on), each with its own warm pool on the same server."""

    def __init__(self, make_pool: Any, spec: ServerSpec, url: str) -> None:
        self.sdk: SessionPool = make_pool(raw_post=False)
        self.fast: SessionPool = make_pool(raw_post=True)
        self.spec = spec
        self.url = url
        for pool in (self.sdk, self.fast):
            assert pool.call(spec, "echo", {"text": "warm"}).success
        seen(url)

    def both(self, function: str, arguments: dict[str, Any], *, raw: int = 1, fresh: bool = False,
             **kwargs: Any) -> tuple[Any, list[Any]]:
        """One call each way: (the loop's result, its POSTs) must equal the raw path's, which is returned."""
        before = self.fast.stats()
        raw_before = before["raw_calls"]
        expected, expected_posts = self.sdk.call(self.spec, function, arguments, **kwargs), seen(self.url)
        got, got_posts = self.fast.call(self.spec, function, arguments, **kwargs), seen(self.url)
        assert comparable(got) == comparable(expected)
        assert got_posts == expected_posts
        after = self.fast.stats()
        # The warm session, not a new one (unless the call's failure retires it on both paths).
        assert after["sessions_opened"] == before["sessions_opened"] + fresh
        assert after["raw_calls"] == raw_before + raw, "the call did not take the path under test"
        assert self.sdk.stats()["raw_calls"] == 0
        return got, got_posts


@pytest.fixture
def pair(make_pool: Any, specs: Specs, url: str) -> Pair:
    return Pair(make_pool, specs.remote(url), url)


def test_a_plain_call_is_the_same_request_and_result(pair: Pair) -> None:
    result, posts = pair.both("echo", {"text": "hello"})
    assert result.success and result.text == "hello"
    assert len(posts) == 1
    headers = dict(posts[0]["headers"])
    assert (headers["mcp-method"], headers["mcp-name"], headers["mcp-protocol-version"]) == (
        "tools/call", "echo", "2026-07-28")
    body = json.loads(posts[0]["body"])
    assert body["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"] == "toolhub"


def test_an_is_error_result_and_structured_content(pair: Pair) -> None:
    failed, _ = pair.both("fail", {"why": "nope"})
    assert not failed.success and "Error executing tool fail" in (failed.error or ""), failed
    point, _ = pair.both("point", {"x": 1, "y": 2})
    assert point.success and point.data == {"x": 1, "y": 2}


def test_structured_content_breaking_the_output_schema_fails_alike(pair: Pair) -> None:
    result, _ = pair.both("point", {"x": 1, "y": 2, "bad": True})
    assert not result.success and "Invalid structured content" in (result.error or ""), result


def test_a_json_rpc_error_is_the_same_error(pair: Pair) -> None:
    # An unknown function is looked up again on the loop (the server's list may have grown): the loop's path.
    result, _ = pair.both("no_such_tool", {}, raw=0)
    assert not result.success and "no_such_tool" in (result.error or ""), result


def test_progress_and_log_messages_reach_the_same_callbacks(pair: Pair, url_mode: str) -> None:
    progress: dict[str, list[Any]] = {"sdk": [], "fast": []}
    result, posts = pair.both("chatty", {"steps": 3})
    assert result.success and result.text == "chatted 3"
    # A JSON answer carries no notifications; an SSE stream carries them before the answer.
    logs = [entry["data"] for entry in result.meta.get("logs", [])]
    assert logs == ([] if url_mode == "json" else ["working on 0", "working on 1", "working on 2", {"done": 3}])
    sdk = pair.sdk.call(pair.spec, "chatty", {"steps": 2}, on_progress=lambda *a: progress["sdk"].append(a))
    sdk_posts = seen(pair.url)
    fast = pair.fast.call(pair.spec, "chatty", {"steps": 2}, on_progress=lambda *a: progress["fast"].append(a))
    assert comparable(fast) == comparable(sdk)
    assert seen(pair.url) == sdk_posts
    assert progress["fast"] == progress["sdk"] == (
        [] if url_mode == "json" else [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")])
    assert "progressToken" in json.loads(sdk_posts[0]["body"])["params"]["_meta"]


def test_input_required_rounds_send_the_same_answers_and_request_state(pair: Pair) -> None:
    answers = ClientRequests(elicit=lambda _params: {"action": "accept", "content": {"people": 3}})
    result, posts = pair.both("book_table", {"restaurant": "Chez Ada"}, client_requests=answers)
    assert result.success and result.data == {"booked": True, "restaurant": "Chez Ada", "people": 3}, result
    assert len(posts) == 2
    retry = json.loads(posts[1]["body"])["params"]
    assert "inputResponses" in retry and "requestState" in retry


def test_x_mcp_header_arguments_are_mirrored_alike(pair: Pair) -> None:
    result, posts = pair.both("regional", {"region": "eu-west"})
    assert result.success and result.text == "eu-west", result
    assert dict(posts[0]["headers"])["mcp-param-region"] == "eu-west"


def test_a_header_mismatch_lists_again_and_resends_alike(pair: Pair) -> None:
    result, posts = pair.both("relist", {"text": "again"})
    assert result.success and result.text == "again", result
    assert [json.loads(post["body"])["method"] for post in posts] == ["tools/call", "tools/list", "tools/call"]


class Tokens:
    """An OAuth token provider (RemoteSpec.token) whose current token the test can make stale."""

    def __init__(self) -> None:
        self.current = "token-1"
        self.refreshed = 0

    def __call__(self, stale: str | None) -> str:
        if stale is not None and stale == self.current:
            self.refreshed += 1
            self.current = f"token-{self.refreshed + 1}"
        return self.current


def test_an_expired_access_token_is_refreshed_and_the_call_resent_alike(make_pool: Any, specs: Specs,
                                                                       url: str) -> None:
    tokens = Tokens()
    plain = specs.remote(url)
    assert isinstance(plain.target, RemoteSpec)
    spec = dataclasses.replace(plain, target=dataclasses.replace(plain.target, token=tokens))
    pair = Pair(make_pool, spec, url)
    tokens.current, tokens.refreshed = "expired-stale", 0
    expected, expected_posts = pair.sdk.call(spec, "echo", {"text": "t"}), seen(url)
    tokens.current, tokens.refreshed = "expired-stale", 0
    got, got_posts = pair.fast.call(spec, "echo", {"text": "t"}), seen(url)
    assert got.success and got.text == "t", got
    assert pair.fast.stats()["raw_calls"] == 0  # OAuth upstreams keep the loop's path (tokens are asked there)
    assert comparable(got) == comparable(expected)
    assert got_posts == expected_posts
    assert [dict(post["headers"])["authorization"] for post in got_posts] == ["Bearer expired-stale",
                                                                              "Bearer token-2"]


def test_a_server_request_on_the_calls_stream_is_answered_alike(pair: Pair) -> None:
    result, posts = pair.both("pinged", {})
    assert result.success and result.text == "pinged", result
    answer = json.loads(posts[1]["body"])
    assert answer["id"] == "server-ping" and ("result" in answer or "error" in answer), answer


def test_an_http_500_is_recorded_alike(pair: Pair) -> None:
    result, posts = pair.both("http500", {})
    assert not result.success and "HTTP 500" in (result.error or ""), result
    assert len(posts) == 1  # never sent twice
    again = pair.fast.call(pair.spec, "echo", {"text": "after"})
    assert again.success, again


def test_an_answer_cut_off_mid_body_fails_alike(pair: Pair) -> None:
    result, posts = pair.both("hangup", {})
    assert not result.success, result
    assert len(posts) == 1


def test_a_stream_that_ends_without_an_answer_fails_alike(pair: Pair) -> None:
    result, posts = pair.both("hangup_stream", {})
    assert not result.success, result
    assert len(posts) == 1


# ---- what only the raw path has to get right ---------------------------------------------------------------------


def test_invalid_arguments_are_refused_alike_before_anything_is_sent(pair: Pair) -> None:
    result, posts = pair.both("echo", {"text": 5}, raw=0)
    assert not result.success and result.error_code == "INVALID_PARAMS", result
    assert posts == []


def test_roots_asked_as_input_required_are_answered_alike(pair: Pair) -> None:
    # A REMOTE tool declares no roots capability: the server refuses the call, as on the loop; sent once.
    result, posts = pair.both("roots", {})
    assert not result.success and "roots capability" in (result.error or ""), result
    assert len(posts) == 1


def test_an_elicitation_round_is_answered_by_the_callers_handler_once(pair: Pair) -> None:
    asked: list[Any] = []

    def elicit(params: Any) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"people": 2}}

    answers = ClientRequests(elicit=elicit)
    result, posts = pair.both("book_table", {"restaurant": "Ada"}, client_requests=answers)
    assert result.success and result.data["people"] == 2, result
    assert len(asked) == 2  # once per pool: the raw path asked the caller exactly once too
    assert [json.loads(post["body"])["method"] for post in posts] == ["tools/call", "tools/call"]


def test_an_http_404_is_tried_once_more_on_a_fresh_session_alike(pair: Pair) -> None:
    result, posts = pair.both("http404", {}, fresh=True)
    assert not result.success and "HTTP 404" in (result.error or ""), result
    calls = [post for post in posts if json.loads(post["body"])["method"] == "tools/call"]
    assert len(calls) == 2  # the first, and the one retry on a fresh session (the server never ran it)
    assert pair.fast.call(pair.spec, "echo", {"text": "after"}).success


def test_a_call_timeout_is_the_same_timeout(pair: Pair) -> None:
    result, posts = pair.both("sleepy", {"seconds": 3}, timeout_s=0.5)
    assert not result.success and result.error_code == "TIMEOUT" and "timed out after 0.5 s" in (result.error or "")
    assert len(posts) == 1
    again = pair.fast.call(pair.spec, "echo", {"text": "after"})  # on a fresh session
    assert again.success, again


def test_concurrent_calls_from_eight_threads_each_get_their_own_answer(pair: Pair) -> None:
    from concurrent.futures import ThreadPoolExecutor

    before = pair.fast.stats()["raw_calls"]
    with ThreadPoolExecutor(8) as threads:
        results = list(threads.map(lambda n: pair.fast.call(pair.spec, "echo", {"text": f"t{n}"}), range(32)))
    assert [r.text for r in results] == [f"t{n}" for n in range(32)], results
    assert pair.fast.stats()["raw_calls"] == before + 32
    posts = seen(pair.url)
    ids = [json.loads(post["body"])["id"] for post in posts]
    assert len(posts) == 32 and len(set(ids)) == 32  # each sent once, each with its own id


def test_progress_takes_the_loops_path(pair: Pair) -> None:
    got = pair.fast.call(pair.spec, "chatty", {"steps": 1}, on_progress=lambda *a: None)
    assert got.success and pair.fast.stats()["raw_calls"] == 0


def test_a_restarted_upstream_is_called_once_on_a_new_socket(make_pool: Any, specs: Specs, url_mode: str) -> None:
    from tests.fixtures.mcp_servers import free_port

    port = free_port()
    args = ("--json",) if url_mode == "json" else ()
    pool = make_pool(raw_post=True)
    with http_server(ONE_POST, port=port, extra_args=args) as first:
        spec = specs.remote(first)
        assert pool.call(spec, "echo", {"text": "before"}).success
        assert pool.call(spec, "echo", {"text": "kept alive"}).success
    with http_server(ONE_POST, port=port, extra_args=args) as second:
        after = pool.call(spec, "echo", {"text": "after"})
        posts = seen(second)
    assert after.success and after.text == "after", after
    assert [json.loads(post["body"])["method"] for post in posts] == ["tools/call"]  # run once, on the new server
    stats = pool.stats()
    # The first call opened the session on the loop; the next two went raw. Stateless: the same session goes on.
    assert (stats["raw_calls"], stats["sessions_opened"]) == (2, 1)


def test_a_2025_upstream_takes_the_loops_path(make_pool: Any, specs: Specs) -> None:
    pool = make_pool(raw_post=True)
    with http_server(extra_args=("--legacy-only",)) as legacy:
        spec = specs.remote(legacy)
        for _ in range(2):
            assert pool.call(spec, "get_inventory", {"sku": "DEMO-001"}).success
    assert pool.stats()["raw_calls"] == 0


def test_sequential_calls_reuse_one_kept_alive_socket(pair: Pair) -> None:
    conn = pair.fast._conns[pair.spec.key]
    assert conn.raw is not None
    sockets = []
    for n in range(3):
        assert pair.fast.call(pair.spec, "echo", {"text": f"k{n}"}).success
        sockets.append([id(s.sock) for s in conn.raw.endpoint._idle])
    assert len(sockets[0]) == 1 and sockets[0] == sockets[1] == sockets[2], sockets


@pytest.mark.parametrize(("code", "status"), [(-32001, 200), (-32001, 400), (-32602, 400), (-32603, 500)])
def test_a_json_rpc_error_of_a_known_function_is_the_same_result(pair: Pair, code: int, status: int) -> None:
    # -32602 is the server's invalid-params answer; at HTTP 500 the status is the failure, not the body.
    result, posts = pair.both("rpc_error", {"code": code, "status": status})
    assert not result.success and len([p for p in posts if '"tools/call"' in p["body"]]) == 1, result
    if status == 500:
        assert "HTTP 500" in (result.error or "")
    else:
        assert f"refused with {code}" in (result.error or ""), result
