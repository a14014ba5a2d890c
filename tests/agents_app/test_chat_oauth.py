"""Chat with a tool that waits for its user: an OAuth tool without a usable connection, or a tool whose per-user
keys the person has not set. The run pauses with an `authorization.required` / `credentials.required` event
(their own link, or the keys to set); once they have connected, resuming the conversation runs the call again."""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import urlsplit

import pytest

from agents_app.models import Conversation
from tenants_app.models import Role
from tests.agents_app.support import chat, events, make_agent, make_model
from tests.fixtures.fake_llm import call, text
from tests.fixtures.mcp_servers import LEAKY
from tests.tools_app.test_oauth_connections import (  # noqa: F401 - server_url is a fixture
    connect_shared,
    discovered_then_disconnected,
    server_url,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_disconnected_oauth_tool_pauses_the_run_until_the_person_connects(
        tenant: Any, member_client: Any, start_llm: Any, server_url: str) -> None:  # noqa: F811
    api = member_client(tenant, Role.ADMIN)
    tool_id, function = discovered_then_disconnected(api, server_url)
    llm = start_llm([call(f"linear__{function}", {}), text("done with linear")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])

    body = chat(api, agent_id, "use linear")
    (needed,) = events(body, "authorization.required")
    assert needed["tool"] == "linear" and needed["function"] == function
    assert "/oauth/start/" in needed["authorize_url"]
    conversation_id = body["conversation_id"]
    assert needed["resume_url"].endswith(f"/api/v1/conversations/{conversation_id}/resume/")
    assert events(body, "tool.result")[0]["error_code"] == "AUTHORIZATION_REQUIRED"
    (done,) = events(body, "done")
    assert done["status"] == "paused" and [w["name"] for w in done["waiting"]] == [f"linear__{function}"]
    assert Conversation.objects.get(pk=conversation_id).status == "awaiting_authorization"
    assert len(llm.requests) == 1  # the model is not told to give up: the call waits

    # Resuming before connecting pauses again, with a fresh link.
    early = api.post(f"/api/v1/conversations/{conversation_id}/resume/").json()
    assert events(early, "authorization.required") and events(early, "done")[0]["status"] == "paused"

    connect_shared(api, tool_id)  # the person follows the link and signs in
    resumed = api.post(f"/api/v1/conversations/{conversation_id}/resume/").json()
    assert not events(resumed, "authorization.required")
    assert events(resumed, "tool.result")[0]["success"] is True
    assert events(resumed, "done")[0] == {**events(resumed, "done")[0], "status": "completed",
                                          "message": "done with linear"}
    assert Conversation.objects.get(pk=conversation_id).status == "idle"
    # The model saw the call's real answer, never the refusal.
    tool_answers = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(tool_answers) == 1 and "AUTHORIZATION_REQUIRED" not in tool_answers[0]["content"]


def test_a_tool_without_the_persons_keys_pauses_and_a_new_message_moves_on(
        tenant: Any, member_client: Any, start_llm: Any) -> None:
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "keyed", "type": "LOCAL", "config": {
        "command": sys.executable, "args": [str(LEAKY)], "user_secrets": ["LEAK"]}}, format="json")
    tool_id = resp.json()["id"]
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    llm = start_llm([call("keyed__fingerprint", {}), text("never mind then"), call("keyed__fingerprint", {}),
                     text("fingerprinted")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])

    body = chat(api, agent_id, "fingerprint me")
    (needed,) = events(body, "credentials.required")
    assert needed["missing"] == ["LEAK"] and urlsplit(needed["connections_url"])[2:4] == ("/connections/", "tenant=acme")
    assert events(body, "done")[0]["status"] == "paused"
    # A new message instead of a resume: the waiting call is answered "not executed" and the chat goes on.
    moved = chat(api, agent_id, "skip it", conversation_id=body["conversation_id"])
    assert events(moved, "done")[0]["message"] == "never mind then"
    # Keys set, the next attempt runs as this person.
    assert api.put(f"/api/v1/tools/{tool_id}/my-credentials/", {"values": {"LEAK": "k-123"}},
                   format="json").status_code == 200
    last = chat(api, agent_id, "now", conversation_id=body["conversation_id"])
    assert events(last, "tool.result")[0]["success"] is True
    assert events(last, "done")[0]["message"] == "fingerprinted"


def test_an_approved_call_that_waits_for_keys_runs_on_resume_without_asking_again(
        tenant: Any, member_client: Any, start_llm: Any) -> None:
    api = member_client(tenant, Role.ADMIN)
    resp = api.post("/api/v1/tools/", {"name": "keyed", "type": "LOCAL", "requires_approval": True, "config": {
        "command": sys.executable, "args": [str(LEAKY)], "user_secrets": ["LEAK"]}}, format="json")
    tool_id = resp.json()["id"]
    assert api.post(f"/api/v1/tools/{tool_id}/refresh/").json()["ok"]
    llm = start_llm([call("keyed__fingerprint", {}), text("fingerprinted")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])

    body = chat(api, agent_id, "fingerprint me")
    (held,) = events(body, "approval.required")
    conversation_id = body["conversation_id"]
    assert api.post(f"/api/v1/approvals/{held['approval_id']}/approve/").json()["status"] == "approved"
    # Approved, it runs and finds the person's keys missing: the run waits for them, not for another approval.
    waiting = api.post(f"/api/v1/conversations/{conversation_id}/resume/").json()
    assert events(waiting, "credentials.required") and not events(waiting, "approval.required")
    assert Conversation.objects.get(pk=conversation_id).status == "awaiting_authorization"

    assert api.put(f"/api/v1/tools/{tool_id}/my-credentials/", {"values": {"LEAK": "k-123"}},
                   format="json").status_code == 200
    resumed = api.post(f"/api/v1/conversations/{conversation_id}/resume/").json()
    assert not events(resumed, "approval.required")
    assert events(resumed, "tool.result")[0]["success"] is True
    assert events(resumed, "done")[0]["message"] == "fingerprinted"
    assert Conversation.objects.get(pk=conversation_id).status == "idle"
