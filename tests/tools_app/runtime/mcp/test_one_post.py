"""A 2026-07-28 REMOTE tools/call sent as one POST (post.OnePost) against the same call through the SDK's
ClientSession: the same results back and the same requests (headers and body, as the server received them) out, for a
real SDK server answering with JSON bodies and with SSE streams."""

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
    """The SDK's path and the one-POST path, each with its own warm pool on the same server."""

    def __init__(self, make_pool: Any, spec: ServerSpec, url: str) -> None:
        self.sdk: SessionPool = make_pool(one_post=False, raw_post=False)
        self.fast: SessionPool = make_pool(raw_post=False)
        self.spec = spec
        self.url = url
        for pool in (self.sdk, self.fast):
            assert pool.call(spec, "echo", {"text": "warm"}).success
        seen(url)

    def both(self, function: str, arguments: dict[str, Any], **kwargs: Any) -> tuple[Any, list[Any]]:
        """One call each way: (the SDK's result, its POSTs) must equal the one-POST path's, which is returned."""
        before = self.fast.stats()
        expected, expected_posts = self.sdk.call(self.spec, function, arguments, **kwargs), seen(self.url)
        got, got_posts = self.fast.call(self.spec, function, arguments, **kwargs), seen(self.url)
        assert comparable(got) == comparable(expected)
        assert got_posts == expected_posts
        assert self.fast.stats()["sessions_opened"] == before["sessions_opened"]  # the warm session, not a new one
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
    result, _ = pair.both("no_such_tool", {})
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
