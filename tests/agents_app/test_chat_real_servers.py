"""Chat with a real third-party MCP server (server-everything over stdio): what the model and the page get."""

from __future__ import annotations

from typing import Any

import pytest

from tenants_app.models import Role
from tests.agents_app.support import chat, events, make_agent, make_model
from tests.fixtures import real_servers as rs
from tests.fixtures.fake_llm import call, text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_pool"), pytest.mark.real_servers]


@pytest.fixture
def member(tenant: Any, member_client: Any) -> Any:
    return member_client(tenant, Role.MEMBER)


@pytest.fixture
def everything(api: Any) -> int:
    rs.require("npm")
    resp = api.post("/api/v1/tools/", {"name": "everything", "type": "LOCAL", "config": {
        "command": rs.node(), "args": [rs.npm_entry(rs.EVERYTHING), "stdio"], "startup_timeout_s": 30}},
        format="json")
    assert resp.status_code == 201, resp.content
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    return tool_id


def tool_messages(llm: Any) -> list[str]:
    last = llm.requests[-1]["messages"]
    return [str(m["content"]) for m in last if m.get("role") == "tool"]


def test_model_reads_resource_text_and_an_image_placeholder(api: Any, member: Any, start_llm: Any,
                                                            everything: int) -> None:
    llm = start_llm([
        call("everything__get-tiny-image", {}),
        call("everything__get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
        text("done"),
    ])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": everything}])
    body = chat(member, agent_id, "show me")
    assert body["status"] == "completed", body
    image_text, resource_text = tool_messages(llm)
    assert "[image: image/png, " in image_text and "The image above is the MCP logo." in image_text
    assert "demo://resource/" in resource_text and "Resource 2" in resource_text
    image_result, resource_result = events(body, "tool.result")
    image_part = next(p for p in image_result["parts"] if p["type"] == "image")
    assert image_part["mimeType"] == "image/png" and image_part["data"].startswith("iVBOR")
    assert any(p["type"] == "link" and p["uri"].startswith("demo://resource/") for p in resource_result["parts"])


def test_a_vision_model_gets_the_image_as_an_image_part(api: Any, member: Any, start_llm: Any,
                                                        everything: int) -> None:
    llm = start_llm([call("everything__get-tiny-image", {}), text("a logo"), call("everything__get-tiny-image", {}),
                     text("still a logo")])
    vision = make_agent(api, model=make_model(api, llm, name="vision", params={"supports_vision": True}),
                        tools=[{"tool": everything}])
    body = chat(member, vision, "what does it look like?")
    assert body["status"] == "completed", body
    sent = llm.requests[1]["messages"]
    (answer,) = [m for m in sent if m.get("role") == "tool"]
    assert "[image: image/png, " in answer["content"] and "image parts you can view" in answer["content"]
    assert "_images" not in answer and "supports_vision" not in llm.requests[1]
    follow = sent[sent.index(answer) + 1]
    assert follow["role"] == "user"
    (part,) = [p for p in follow["content"] if p["type"] == "image_url"]
    assert part["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    # The stored transcript has no extra user turn: a model without vision sees a placeholder only.
    plain = make_agent(api, model=make_model(api, llm, name="plain"), tools=[{"tool": everything}], name="plain")
    body = chat(member, plain, "and now?")
    assert body["status"] == "completed", body
    sent = llm.requests[3]["messages"]
    (answer,) = [m for m in sent if m.get("role") == "tool"]
    assert "[image: image/png, " in answer["content"] and "does not accept images" in answer["content"]
    assert not any(isinstance(m.get("content"), list) for m in sent)
    assert "iVBOR" not in str(sent)


def test_destructive_hint_holds_a_chat_call_for_approval(api: Any, member: Any, start_llm: Any,
                                                         tmp_path: Any) -> None:
    rs.require("npm")
    resp = api.post("/api/v1/tools/", {"name": "memory", "type": "LOCAL", "config": {
        "command": rs.node(), "args": [rs.npm_entry(rs.MEMORY)],
        "env": {"MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")}, "startup_timeout_s": 30}}, format="json")
    tool_id = int(resp.json()["id"])
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    llm = start_llm([call("memory__read_graph", {}), call("memory__delete_entities", {"entityNames": ["x"]}),
                     text("never")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])
    body = chat(member, agent_id, "forget x")
    assert events(body, "tool.result")[0]["success"]  # readOnlyHint: runs at once
    assert body["status"] == "paused"
    required = events(body, "approval.required")[0]
    assert required["function"] == "delete_entities" and required["safety"] == "DESTRUCTIVE" and required["warning"]


def test_progress_notifications_stream_as_tool_progress_events(api: Any, member: Any, start_llm: Any,
                                                               everything: int) -> None:
    llm = start_llm([call("everything__trigger-long-running-operation", {"duration": 0.3, "steps": 3}),
                     text("finished")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": everything}])
    body = chat(member, agent_id, "run it")
    names = [e["event"] for e in body["events"]]
    assert names.count("tool.progress") == 3
    assert names.index("tool.progress") < names.index("tool.result")
    progress = events(body, "tool.progress")
    assert [(p["progress"], p["total"]) for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert progress[0]["function"] == "trigger-long-running-operation"
