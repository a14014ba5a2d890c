"""A server's own requests during an agent's call: MCP elicitation (a question for the chat's user) and
sampling (a completion from the agent's model), each held as an approval in a streamed chat.

The server is a real stdio process (tests/fixtures/mcp_servers/client_probe.py) that sends
elicitation/create and sampling/createMessage mid-call; the model is the fake LLM.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest

from tests.agents_app.support import chat, events, make_agent, make_model
from tests.fixtures.fake_llm import call, text
from tests.fixtures.mcp_servers import CLIENT_PROBE
from tools_app.models import Approval, ApprovalStatus, CallStatus, ToolCall

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_pool")]


def probe(api: Any, **config: Any) -> int:
    resp = api.post("/api/v1/tools/", {"name": "probe", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(CLIENT_PROBE)], "call_timeout_s": 20, **config}}, format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    return tool_id


Answer = Callable[[str, dict[str, Any]], None]


def streamed(client: Any, agent_id: int, message: str, on_event: Answer,
             conversation_id: int | None = None) -> list[tuple[str, dict[str, Any]]]:
    """A streamed chat read frame by frame; `on_event(name, data)` runs as each arrives (the run waits)."""
    body: dict[str, Any] = {"message": message, "stream": True}
    if conversation_id is not None:
        body["conversation_id"] = conversation_id
    resp = client.post(f"/api/v1/agents/{agent_id}/chat/", body, format="json")
    assert resp.status_code == 200, resp.content
    seen: list[tuple[str, dict[str, Any]]] = []
    buffer = ""
    for chunk in resp.streaming_content:
        buffer += chunk.decode()
        while "\n\n" in buffer:
            frame, buffer = buffer.split("\n\n", 1)
            lines = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
            if "event" in lines:
                name, data = lines["event"], json.loads(lines["data"])
                seen.append((name, data))
                on_event(name, data)
    return seen


def results(seen: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [d for n, d in seen if n == "tool.result"]


def test_a_servers_question_is_put_to_the_user_and_the_answer_goes_back(api: Any, start_llm: Any) -> None:
    tool_id = probe(api)
    llm = start_llm([call("probe__book_table", {"restaurant": "Chez Ada"}), text("booked")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])
    asked: list[dict[str, Any]] = []

    def answer(name: str, data: dict[str, Any]) -> None:
        if name != "elicitation.required":
            return
        asked.append(data)
        url = f"/api/v1/approvals/{data['approval_id']}/approve/"
        wrong = api.post(url, {"answer": {"people": "many"}}, format="json")
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "invalid_answer", wrong.content
        assert wrong.json()["error"]["details"]["path"] == ["people"]  # names the field that does not fit
        empty = api.post(url, {}, format="json")  # "people" is required: approving needs an answer
        assert empty.status_code == 400 and empty.json()["error"]["code"] == "invalid_answer", empty.content
        listed = api.get("/api/v1/approvals/?status=pending").json()["results"]
        assert [a["approval_id"] for a in listed] == [data["approval_id"]]
        ok = api.post(url, {"answer": {"people": 3, "terrace": True}}, format="json")
        assert ok.status_code == 200, ok.content

    seen = streamed(api, agent_id, "book a table", answer)
    (question,) = asked
    assert question["message"] == "How many people for Chez Ada?" and question["mode"] == "form"
    assert question["requested_schema"]["required"] == ["people"]
    assert question["tool"] == "probe" and question["function"] == "book_table"
    names = [n for n, _ in seen]
    assert names.index("elicitation.required") < names.index("tool.result") < names.index("done")
    (result,) = results(seen)
    assert result["success"], result
    assert json.loads(result["content"]) == {"action": "accept", "content": {"people": 3, "terrace": True}}
    assert seen[-1][1]["status"] == "completed"
    approval = Approval.objects.get(pk=question["approval_id"])
    assert approval.status == ApprovalStatus.APPROVED and approval.held_arguments is None
    assert approval.tool_call.status == CallStatus.OK and approval.tool_call.arguments == {"request": "elicitation"}


def test_a_denied_question_is_declined_and_a_chat_that_is_not_streamed_declines_with_the_reason(
        api: Any, start_llm: Any) -> None:
    tool_id = probe(api)
    llm = start_llm([call("probe__book_table", {}), text("ok"), call("probe__book_table", {}), text("ok")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])

    def deny(name: str, data: dict[str, Any]) -> None:
        if name == "elicitation.required":
            assert api.post(f"/api/v1/approvals/{data['approval_id']}/deny/").status_code == 200

    (result,) = results(streamed(api, agent_id, "book", deny))
    assert json.loads(result["content"]) == {"action": "decline"}

    body = chat(api, agent_id, "book again")
    (result,) = events(body, "tool.result")
    assert not result["success"] and "this chat is not streamed" in result["content"], result
    assert not events(body, "elicitation.required")


def test_direct_invoke_declines_a_servers_question_with_the_reason(api: Any) -> None:
    tool_id = probe(api)
    body = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": "book_table", "arguments": {}},
                    format="json").json()
    assert not body["success"] and body["error_code"] == "BUSINESS_ERROR"
    assert "only during a streamed chat" in body["text"] and "direct invoke" in body["text"], body
    assert not Approval.objects.exists()


def test_sampling_is_answered_by_the_agents_model_once_the_user_approves(api: Any, start_llm: Any) -> None:
    tool_id = probe(api, sampling=True)
    llm = start_llm([call("probe__summarize", {"text": "a long story about tools"}), text("Tools help agents work."),
                     text("Summary given.")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])
    requests: list[dict[str, Any]] = []

    def approve(name: str, data: dict[str, Any]) -> None:
        if name == "sampling.required":
            requests.append(data)
            assert len(llm.requests) == 1  # nothing reached the model before the approval
            assert api.post(f"/api/v1/approvals/{data['approval_id']}/approve/").status_code == 200

    seen = streamed(api, agent_id, "summarize it", approve)
    (request,) = requests
    assert request["system_prompt"] == "You summarize in five words." and request["max_tokens"] == 50
    assert request["messages"][0]["content"]["text"] == "Summarize: a long story about tools"
    sampled = llm.requests[1]
    assert sampled["messages"] == [{"role": "system", "content": "You summarize in five words."},
                                   {"role": "user", "content": "Summarize: a long story about tools"}]
    assert sampled["max_tokens"] == 50 and "tools" not in sampled
    (result,) = results(seen)
    answer = json.loads(result["content"])
    assert answer["content"]["text"] == "Tools help agents work." and answer["model"] == "fake-model"
    assert seen[-1][1]["message"] == "Summary given."
    assert ToolCall.objects.get(pk=Approval.objects.get(pk=request["approval_id"]).tool_call_id).status == "ok"


def test_sampling_is_off_by_default_and_declined_when_denied(api: Any, start_llm: Any) -> None:
    off = probe(api)
    llm = start_llm([call("probe__summarize", {"text": "x"}), text("done")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": off}])
    seen = streamed(api, agent_id, "summarize", lambda name, data: None)
    (result,) = results(seen)
    assert not result["success"] and "client refused" in result["content"]
    assert len(llm.requests) == 2 and not [n for n, _ in seen if n == "sampling.required"]

    api.patch(f"/api/v1/tools/{off}/", {"config": {"command": sys.executable, "args": [str(CLIENT_PROBE)],
                                                   "sampling": True}}, format="json")
    llm2 = start_llm([call("probe__summarize", {"text": "x"}), text("done")])
    other = make_agent(api, model=make_model(api, llm2, name="m2"), tools=[{"tool": off}], name="other")

    def deny(name: str, data: dict[str, Any]) -> None:
        if name == "sampling.required":
            assert api.post(f"/api/v1/approvals/{data['approval_id']}/deny/").status_code == 200

    (result,) = results(streamed(api, other, "summarize", deny))
    assert not result["success"] and "did not approve the sampling request" in result["content"], result
    assert len(llm2.requests) == 2  # the model was never asked to sample


def test_real_server_everything_asks_its_question_and_samples_through_the_chat(api: Any, start_llm: Any) -> None:
    from tests.fixtures import real_servers as rs

    rs.require("npm")
    resp = api.post("/api/v1/tools/", {"name": "everything", "type": "LOCAL", "config": {
        "command": rs.node(), "args": [rs.npm_entry(rs.EVERYTHING), "stdio"], "startup_timeout_s": 30,
        "call_timeout_s": 30, "sampling": True}}, format="json")
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    names = {f["name"] for f in api.get(f"/api/v1/tools/{tool_id}/").json()["functions"]}
    # The server offers these only to a client that declares the capabilities.
    assert {"trigger-elicitation-request", "trigger-sampling-request"} <= names
    llm = start_llm([call("everything__trigger-elicitation-request", {}), text("thanks"),
                     call("everything__trigger-sampling-request", {"prompt": "say hi", "maxTokens": 20}),
                     text("Hi from the agent's model."), text("done")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])

    def answer(name: str, data: dict[str, Any]) -> None:
        if name == "elicitation.required":
            assert data["requested_schema"]["required"] == ["name"]
            ok = api.post(f"/api/v1/approvals/{data['approval_id']}/approve/",
                          {"answer": {"name": "Ada Lovelace", "integer": 7}}, format="json")
            assert ok.status_code == 200, ok.content
        elif name == "sampling.required":
            assert api.post(f"/api/v1/approvals/{data['approval_id']}/approve/").status_code == 200

    (asked,) = results(streamed(api, agent_id, "ask me", answer))
    assert asked["success"] and "- Name: Ada Lovelace" in asked["content"] and "- Favorite Integer: 7" in asked["content"]
    conversation = Approval.objects.latest("pk").tool_call.conversation_id
    (sampled,) = results(streamed(api, agent_id, "sample", answer, conversation_id=conversation))
    assert sampled["success"] and "Hi from the agent's model." in sampled["content"], sampled
    assert "Resource trigger-sampling-request context: say hi" in str(llm.requests[3]["messages"])
