"""Plugin hooks in chat with the fake model: prompt context, titles, refusals, approval cards, shown results."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents_app.models import Conversation
from tenants_app.models import Role
from tests.agents_app.support import builtin, chat, events, make_agent, make_model
from tests.factories import UserFactory
from tests.fixtures.fake_llm import call, text
from tests.tools_app.test_plugins_api import SAMPLE, sample_installed
from tools_app.models import Approval, ToolCall
from tools_app.runtime import registry
from tools_app.runtime.plugin import ToolContext, ToolPlugin
from tools_app.runtime.result import ToolResult
from tools_app.services.builtins_sync import sync_builtin_tools

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_pool")]

RETITLE = "sample_retitle__sample_retitle"


@pytest.fixture
def sample(settings: Any, tenant: Any) -> Any:
    assert sample_installed(), "the sample plugin is not installed: run `make test-plugins`"
    settings.TOOLHUB_TOOL_PLUGINS = [SAMPLE]
    sync_builtin_tools(tenant=tenant, refresh=True)
    return builtin(tenant, "sample_retitle", enable=True)


def agent_with(api: Any, llm: Any, tool: Any) -> int:
    return make_agent(api, model=make_model(api, llm), tools=[{"tool": tool.pk}], system_prompt="Be brief.")


def test_provide_context_joins_the_system_prompt_before_each_model_call(tenant: Any, api: Any, member_client: Any,
                                                                        start_llm: Any, sample: Any) -> None:
    member = member_client(tenant, Role.MEMBER, user=UserFactory(username="mia"))
    llm = start_llm([text("hi")])
    agent_id = agent_with(api, llm, sample)
    first = chat(member, agent_id, "hello")
    system = llm.requests[0]["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == ("Be brief.\n\nsample_retitle: the user 'mia' has 1 conversation(s); "
                                 "rename them only when they ask.")
    chat(member, agent_id, "again")  # a new conversation: the context is worked out again
    assert "has 2 conversation(s)" in llm.requests[-1]["messages"][0]["content"]
    chat(member, agent_id, "more", conversation_id=first["conversation_id"])
    assert llm.requests[-1]["messages"][0]["content"].count("sample_retitle:") == 1  # replaced, never stacked


def test_card_summary_and_shown_result(tenant: Any, api: Any, member_client: Any, start_llm: Any, sample: Any,
                                       settings: Any) -> None:
    settings.TOOLHUB_TOOL_RESULT_CHARS = 40
    member = member_client(tenant, Role.MEMBER, user=UserFactory(username="noor"))
    llm = start_llm([call(RETITLE, {"match": "trip", "text": "[old]"}), text("renamed them")])
    agent_id = agent_with(api, llm, sample)
    body = chat(member, agent_id, "rename my trip chats")  # this conversation's title matches "trip"
    required = events(body, "approval.required")[0]
    assert required["summary"] == "rename 1 conversation(s) matching 'trip'", required
    assert required["title"] == "Rename conversations matching 'trip'"
    assert Approval.objects.get(pk=required["approval_id"]).summary == required["summary"]

    assert member.post(f"/api/v1/approvals/{required['approval_id']}/approve/").json()["status"] == "approved"
    resumed = member.post(f"/api/v1/conversations/{body['conversation_id']}/resume/").json()
    result = events(resumed, "tool.result")[0]
    assert result["success"] and result["shown"] is True, result
    assert result["title"] == "Rename conversations matching 'trip'"
    assert result["data"]["rows"] == [{"id": body["conversation_id"], "before": "rename my trip chats",
                                       "after": "[old] rename my trip chats"}]
    # the model read the whole result, not the 40-character cut
    answer = llm.requests[-1]["messages"][-1]["content"]
    assert answer == "renamed 1 conversation(s)" and "truncated" not in answer
    assert events(resumed, "tool.call")[0]["title"] == "Rename conversations matching 'trip'"
    audit = ToolCall.objects.get(conversation_id=body["conversation_id"], status="ok")
    assert audit.title == "Rename conversations matching 'trip'"


def test_a_refused_user_is_never_asked_for_approval(tenant: Any, api: Any, member_client: Any, start_llm: Any,
                                                    sample: Any) -> None:
    guest = member_client(tenant, Role.MEMBER, user=UserFactory(username="guest-1"))
    llm = start_llm([call(RETITLE, {"match": "trip", "text": "x"}), text("I cannot")])
    agent_id = agent_with(api, llm, sample)
    body = chat(guest, agent_id, "rename my trip chats")
    assert body["message"] == "I cannot" and not events(body, "approval.required"), body
    result = events(body, "tool.result")[0]
    assert (result["error_code"], result["error"]) == ("REFUSED", "guest accounts may not rename conversations")
    assert "REFUSED" in llm.requests[-1]["messages"][-1]["content"]
    assert not Approval.objects.exists()


def test_before_approval_refuses_in_chat_before_asking(tenant: Any, api: Any, member_client: Any,
                                                       start_llm: Any, sample: Any) -> None:
    member = member_client(tenant, Role.MEMBER)
    llm = start_llm([call(RETITLE, {"match": "zzz-nothing", "text": "x"}), text("nothing matched")])
    agent_id = agent_with(api, llm, sample)
    body = chat(member, agent_id, "rename my chats")
    result = events(body, "tool.result")[0]
    assert result["error_code"] == "REFUSED" and "nothing to rename" in result["error"], result
    assert not Approval.objects.exists() and body["message"] == "nothing matched"


def test_bad_arguments_from_the_model_are_audited_as_refused(tenant: Any, api: Any, member_client: Any,
                                                             start_llm: Any) -> None:
    member = member_client(tenant, Role.MEMBER)
    tool = builtin(tenant, "read_file")
    llm = start_llm([call("read_file__read_file", {"path": "a.txt", "mode": "fast"}), text("sorry")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool.pk}])
    body = chat(member, agent_id, "read a.txt")
    assert events(body, "tool.result")[0]["error_code"] == "INVALID_PARAMS"
    audit = ToolCall.objects.get(conversation_id=body["conversation_id"])
    assert (audit.status, audit.error_code, audit.via) == ("denied", "INVALID_PARAMS", "chat")
    assert audit.arguments == {"path": "a.txt", "mode": "fast"} and "mode" in audit.error
    assert audit.agent_id == agent_id and audit.actor_id == member.user.pk


class _Clock(ToolPlugin):
    """Says how often its context was asked for: each model call of a run must see a fresh one."""

    name = "test_clock"
    description = "Tell the time."
    asked = 0

    def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult.ok(text="noon")

    def provide_context(self, ctx: ToolContext) -> str | None:
        type(self).asked += 1
        return f"context #{type(self).asked} for {ctx.user.get_username()}"


@pytest.fixture
def clock(tenant: Any) -> Iterator[Any]:
    registry.register(_Clock)
    _Clock.asked = 0
    sync_builtin_tools(tenant=tenant)
    yield builtin(tenant, "test_clock")
    registry.unregister(_Clock.name)


def test_provide_context_is_asked_again_before_every_model_call(tenant: Any, api: Any, member_client: Any,
                                                                start_llm: Any, clock: Any) -> None:
    member = member_client(tenant, Role.MEMBER, user=UserFactory(username="ada"))
    llm = start_llm([call("test_clock__test_clock", {}), text("it is noon")])
    agent_id = agent_with(api, llm, clock)
    body = chat(member, agent_id, "what time is it?")
    assert body["message"] == "it is noon"
    first, second = (r["messages"][0]["content"] for r in llm.requests[-2:])
    assert first.startswith("Be brief.\n\ncontext #") and first.endswith(" for ada")
    assert first != second  # asked again after the tool ran
    stored = Conversation.objects.get(pk=body["conversation_id"]).run_state["messages"][0]["content"]
    assert stored == second
