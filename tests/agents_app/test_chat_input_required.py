"""A 2026-07-28 server's own input requests (an `input_required` result: `Resolve`/`Elicit`, `Sample`) during an
agent's call reach the chat's person as a 2025 server's elicitation and sampling requests do
(test_chat_client_requests.py), LOCAL and REMOTE; the server is tests/fixtures/mcp_servers/modern_only.py (LOCAL:
modern_mini.py, its stdio answers without the SDK's start cost)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents_app.support import chat, events, make_agent, make_model
from tests.agents_app.test_chat_client_requests import results, streamed
from tests.fixtures.fake_llm import call, text
from tests.fixtures.mcp_servers import MODERN_MINI, MODERN_ONLY, http_server
from tools_app.models import Approval, ApprovalStatus, CallStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_pool")]


@pytest.fixture(scope="module")
def modern_url() -> Iterator[str]:
    with http_server(MODERN_ONLY) as url:
        yield url


def modern(api: Any, kind: str, url: str = "", **config: Any) -> int:
    cfg: dict[str, Any] = ({"url": url, "timeout_s": 20} if kind == "REMOTE" else
                           {"command": sys.executable, "args": [str(MODERN_MINI)], "call_timeout_s": 20})
    resp = api.post("/api/v1/tools/", {"name": "modern", "type": kind, "config": {**cfg, **config}}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    refreshed = api.post(f"/api/v1/tools/{tool_id}/refresh/").json()
    assert refreshed["ok"] and refreshed["protocol_version"] == "2026-07-28", refreshed
    return tool_id


@pytest.mark.parametrize("kind", ["LOCAL", "REMOTE"])
def test_a_2026_servers_question_is_put_to_the_person_and_the_answer_reaches_it(
        api: Any, start_llm: Any, request: pytest.FixtureRequest, kind: str) -> None:
    tool_id = modern(api, kind, request.getfixturevalue("modern_url") if kind == "REMOTE" else "")
    llm = start_llm([call("modern__book_table", {"restaurant": "Chez Ada"}), text("booked")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])
    asked: list[dict[str, Any]] = []

    def answer(name: str, data: dict[str, Any]) -> None:
        if name != "elicitation.required":
            return
        asked.append(data)
        url = f"/api/v1/approvals/{data['approval_id']}/approve/"
        wrong = api.post(url, {"answer": {"people": 40}}, format="json")  # the schema's maximum is 12
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "invalid_answer", wrong.content
        ok = api.post(url, {"answer": {"people": 3}}, format="json")
        assert ok.status_code == 200, ok.content

    seen = streamed(api, agent_id, "book a table", answer)
    (question,) = asked
    assert question["message"] == "How many people for Chez Ada?"
    assert question["requested_schema"]["required"] == ["people"]
    assert question["tool"] == "modern" and question["function"] == "book_table"
    names = [n for n, _ in seen]
    assert names.index("elicitation.required") < names.index("tool.result") < names.index("done")
    (result,) = results(seen)
    assert result["success"], result
    assert json.loads(result["content"]) == {"booked": True, "restaurant": "Chez Ada", "people": 3}
    approval = Approval.objects.get(pk=question["approval_id"])
    assert approval.status == ApprovalStatus.APPROVED and approval.tool_call.status == CallStatus.OK


def test_a_denied_question_reaches_the_server_as_declined_and_an_unstreamed_chat_ends_the_call(
        api: Any, start_llm: Any) -> None:
    tool_id = modern(api, "LOCAL")
    llm = start_llm([call("modern__book_table", {"restaurant": "x"}), text("ok"),
                     call("modern__book_table", {"restaurant": "x"}), text("ok")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])

    def deny(name: str, data: dict[str, Any]) -> None:
        if name == "elicitation.required":
            assert api.post(f"/api/v1/approvals/{data['approval_id']}/deny/").status_code == 200

    (result,) = results(streamed(api, agent_id, "book", deny))
    assert json.loads(result["content"]) == {"booked": False, "action": "decline"}

    body = chat(api, agent_id, "book again")
    (result,) = events(body, "tool.result")
    assert not result["success"] and "this chat is not streamed" in result["content"], result
    assert not events(body, "elicitation.required")


def test_sampling_of_a_2026_server_is_answered_by_the_agents_model_once_approved(
        api: Any, start_llm: Any, modern_url: str) -> None:
    tool_id = modern(api, "REMOTE", modern_url, sampling=True)
    llm = start_llm([call("modern__summarize", {"text": "a long story about tools"}), text("Tools help agents."),
                     text("Summary given.")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])
    requests: list[dict[str, Any]] = []

    def approve(name: str, data: dict[str, Any]) -> None:
        if name == "sampling.required":
            requests.append(data)
            assert api.post(f"/api/v1/approvals/{data['approval_id']}/approve/").status_code == 200

    seen = streamed(api, agent_id, "summarize it", approve)
    (request,) = requests
    assert request["messages"][0]["content"]["text"] == "Summarize: a long story about tools"
    (result,) = results(seen)
    assert result["success"], result
    assert json.loads(result["content"]) == {"summary": "Tools help agents.", "model": "fake-model"}
