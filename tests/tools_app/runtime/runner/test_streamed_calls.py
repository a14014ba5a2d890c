"""Progress and a server's input requests cross the runner: a LOCAL server's questions (2025 elicitation requests and
2026 input_required rounds) reach the web process's handlers and their answers reach the server, as in-process.

The runner's app (`build_app`) is served for real on a loopback port over its own SessionPool; placement is not what
is tested here (tests/tools_app/test_runners.py covers it), so the web side's registry names this one runner. The 2026
server is modern_mini.py (modern_only.py's stdio answers without the SDK: the wire tested is the runner's)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from tests.fixtures.mcp_servers import CLIENT_PROBE, MODERN_MINI, free_port, wait_listening
from tests.tools_app.runtime.mcp.conftest import LOOPBACK, Specs
from tools_app.runtime.mcp import SessionPool
from tools_app.runtime.mcp.client_requests import ClientRequestRefused, ClientRequests
from tools_app.runtime.runner.app import build_app
from tools_app.runtime.runner.client import RunnerPool
from tools_app.runtime.runner.placement import RunnerInfo
from tools_app.runtime.sandbox import SandboxUnavailable

SECRET = "streamed-calls-secret"


class OneRunner:
    """The registry surface RunnerPool reads, naming one runner."""

    def __init__(self, url: str) -> None:
        self.info = RunnerInfo(id="r1", url=url)

    def runners(self, *, max_age_s: float = 1.0) -> list[RunnerInfo]:
        return [self.info]

    def forget(self) -> None:
        pass

    def describe(self) -> list[dict[str, Any]]:
        return [self.info.__dict__]

    rejected = 0


@pytest.fixture
def web(make_pool: Any) -> Iterator[RunnerPool]:
    runner_pool = make_pool()
    port = free_port()
    # The specs here run unsandboxed (what is tested is the wire, not the sandbox), which a runner allows only when told.
    app = build_app(runner_pool, SECRET, allow_unsandboxed=True)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_listening(port)
    facade = RunnerPool(SessionPool(policy=LOOPBACK), OneRunner(f"http://127.0.0.1:{port}"), SECRET)  # type: ignore[arg-type]
    yield facade
    facade.shutdown()
    server.should_exit = True
    thread.join(10)


@pytest.mark.parametrize("script", [MODERN_MINI, CLIENT_PROBE], ids=["2026", "2025"])
def test_a_local_servers_question_reaches_the_caller_across_the_runner(web: RunnerPool, specs: Specs,
                                                                       script: Any) -> None:
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"people": 5}}

    result = web.call(specs.local(script), "book_table", {"restaurant": "Chez Ada"},
                      client_requests=ClientRequests(elicit=elicit))
    assert result.success, result.error
    assert asked and asked[0]["message"] == "How many people for Chez Ada?"
    assert "5" in result.text


def test_a_refusal_crosses_the_runner_with_its_reason(web: RunnerPool, specs: Specs) -> None:
    def refuse(_params: dict[str, Any]) -> dict[str, Any]:
        raise ClientRequestRefused("declined: the person is away")

    result = web.call(specs.local(MODERN_MINI), "book_table", {"restaurant": "x"},
                      client_requests=ClientRequests(elicit=refuse))
    assert not result.success and "the person is away" in (result.error or ""), result


def test_progress_crosses_the_runner(web: RunnerPool, specs: Specs) -> None:
    seen: list[float] = []
    result = web.call(specs.local(MODERN_MINI), "slow", {"steps": 3}, on_progress=lambda p, _t, _m: seen.append(p))
    assert result.success, result.error
    assert seen == [1, 2, 3]


def test_a_call_nobody_listens_to_still_goes_the_plain_way(web: RunnerPool, specs: Specs) -> None:
    result = web.call(specs.local(MODERN_MINI), "echo", {"text": "plain"})
    assert result.success and result.text == "plain", result


def test_a_streamed_call_keeps_the_runners_sandbox_rule(make_pool: Any, specs: Specs) -> None:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(make_pool(), SECRET), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_listening(port)
    facade = RunnerPool(SessionPool(policy=LOOPBACK), OneRunner(f"http://127.0.0.1:{port}"), SECRET)  # type: ignore[arg-type]
    try:
        with pytest.raises(SandboxUnavailable):
            facade.call(specs.local(MODERN_MINI), "echo", {"text": "x"},
                        client_requests=ClientRequests(elicit=lambda _p: {"action": "decline"}))
    finally:
        facade.shutdown()
        server.should_exit = True
        thread.join(10)


async def _prompt(session: Any, responses: Any, state: str | None) -> Any:
    return await session.get_prompt("booking", {}, input_responses=responses, request_state=state,
                                    allow_input_required=True)


async def _resource(session: Any, responses: Any, state: str | None) -> Any:
    return await session.read_resource("booking://table", input_responses=responses, request_state=state,
                                       allow_input_required=True)


def test_a_local_servers_question_in_a_prompt_or_resource_crosses_the_runner(web: RunnerPool, specs: Specs) -> None:
    """prompts/get and resources/read of a LOCAL server on a runner: the server's question (a 2026 input_required
    round) reaches the web side's handler and the answer the server, as a tool call's do."""
    asked: list[str] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {"people": 5}}

    spec = specs.local(MODERN_MINI)
    prompt = web.asking_request(spec, _prompt, ClientRequests(elicit=elicit), "prompt booking")
    resource = web.asking_request(spec, _resource, ClientRequests(elicit=elicit), "booking://table")
    assert prompt.messages[0].content.text == "Book a table for 5."
    assert resource.contents[0].text == "table for 5"
    assert asked == ["How many people for the booking?"] * 2


def test_a_prompts_question_nobody_may_answer_fails_it_with_the_reason_across_the_runner(web: RunnerPool,
                                                                                       specs: Specs) -> None:
    with pytest.raises(Exception, match="did not declare elicitation"):
        web.asking_request(specs.local(MODERN_MINI), _prompt,
                           ClientRequests(no_elicit="declined: the client did not declare elicitation"), "prompt")


def test_a_stateless_round_crosses_the_runner(web: RunnerPool, specs: Specs) -> None:
    """Stateless rounds (a 2026 gateway client): the server's question comes back in the result, not to a handler,
    and the next call sends the answer with the server's requestState; both cross the runner."""
    from tools_app.runtime.mcp.client_requests import INPUT_REQUIRED, Resume

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("handed back, not asked in place")

    spec = specs.local(MODERN_MINI, tool_id=7, version=3)
    first = web.call(spec, "book_table", {"restaurant": "Chez Ada"},
                     client_requests=ClientRequests(elicit=elicit, stateless=Resume()))
    asked = first.meta[INPUT_REQUIRED]
    assert [q["params"]["message"] for q in asked["requests"].values()] == ["How many people for Chez Ada?"]
    assert asked["rounds"] == 1 and asked["revision"] == [7, 3]
    answers = {key: {"action": "accept", "content": {"people": 6}} for key in asked["requests"]}
    resume = Resume(responses=answers, state=asked["state"], rounds=1, revision=(7, 3))
    done = web.call(spec, "book_table", {"restaurant": "Chez Ada"},
                    client_requests=ClientRequests(elicit=elicit, stateless=resume))
    assert done.success and INPUT_REQUIRED not in done.meta, done
    assert json.loads(done.text) == {"booked": True, "restaurant": "Chez Ada", "people": 6}


# --- sampling across the runner: the server asks the caller's model -------------------------------------------------


def _completion(text: str, model: str = "client-model-7") -> dict[str, Any]:
    return {"role": "assistant", "model": model, "content": {"type": "text", "text": text}}


@pytest.mark.parametrize("script", [MODERN_MINI, CLIENT_PROBE], ids=["2026", "2025"])
def test_a_local_servers_sampling_request_reaches_the_callers_model_across_the_runner(web: RunnerPool, specs: Specs,
                                                                                     script: Any) -> None:
    """Asked in place (a chat, a 2025 gateway client): the server's sampling request (a 2026 input_required round, or
    a 2025 request on its session) reaches the web side's `sample` handler whole, and its completion the server."""
    asked: list[dict[str, Any]] = []

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return _completion("Tools help agents.")

    result = web.call(specs.local(script, tool_id=11, sampling=True), "summarize",
                      {"text": "a long story about tools"}, client_requests=ClientRequests(sample=sample))
    assert result.success, result.error
    (params,) = asked
    assert params["messages"][0]["content"]["text"] == "Summarize: a long story about tools"
    assert params["maxTokens"] == 50 and params["systemPrompt"] == "You summarize in five words."
    answered = json.loads(result.text)  # each server says it its way: the completion's text and model came back
    assert answered["model"] == "client-model-7" and "Tools help agents." in result.text, answered


def test_a_sampling_request_nobody_may_answer_fails_the_call_with_the_reason_across_the_runner(
        web: RunnerPool, specs: Specs) -> None:
    result = web.call(specs.local(MODERN_MINI, tool_id=12, sampling=True), "summarize", {"text": "x"},
                      client_requests=ClientRequests(no_sample="declined: the client did not declare sampling",
                                                     elicit=lambda _p: {"action": "decline"}))
    assert not result.success and "did not declare sampling" in (result.error or ""), result


def test_a_stateless_sampling_round_crosses_the_runner(web: RunnerPool, specs: Specs) -> None:
    """A 2026 gateway client: the server's sampling request comes back in the result (keyed, its method named, its
    params whole), and the completion the client sends with the server's requestState reaches the server."""
    from tools_app.runtime.mcp.client_requests import INPUT_REQUIRED, Resume

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("handed back, not asked in place")

    spec = specs.local(MODERN_MINI, tool_id=13, version=2, sampling=True)
    first = web.call(spec, "summarize", {"text": "a long story about tools"},
                     client_requests=ClientRequests(sample=sample, stateless=Resume()))
    assert first.success, first.error
    asked = first.meta[INPUT_REQUIRED]
    ((key, request),) = asked["requests"].items()
    assert request["method"] == "sampling/createMessage", request
    assert request["params"]["messages"][0]["content"]["text"] == "Summarize: a long story about tools"
    assert asked["rounds"] == 1 and asked["revision"] == [13, 2]
    resume = Resume(responses={key: _completion("Five words, by hand.", "by-hand")}, state=asked["state"], rounds=1,
                    revision=(13, 2))
    done = web.call(spec, "summarize", {"text": "a long story about tools"},
                    client_requests=ClientRequests(sample=sample, stateless=resume))
    assert done.success and INPUT_REQUIRED not in done.meta, done
    assert json.loads(done.text) == {"summary": "Five words, by hand.", "model": "by-hand"}
