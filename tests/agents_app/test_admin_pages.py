"""Small things on the agents' admin pages: help texts keep their placeholders, the ChatModel URL box is wide,
agents and conversations link their calls."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agents_app.models import Agent, Conversation
from tests.factories import ToolFactory, UserFactory
from tools_app.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db



def test_intent_help_text_shows_the_ref_placeholder(staff: Client) -> None:
    html = staff.get("/admin/agents_app/intentnode/add/").content.decode()
    # Shown as text (<tool>__<function>), never eaten as an HTML tag ("One __ per line").
    assert "<code>&lt;tool&gt;__&lt;function&gt;</code>" in html
    assert "<tool>" not in html and " __ " not in html


def test_agent_help_text_shows_the_ref_placeholder(staff: Client) -> None:
    html = staff.get("/admin/agents_app/agent/add/").content.decode()
    assert "<code>&lt;tool&gt;__&lt;function&gt;</code>" in html and "<tool>" not in html


def test_chat_model_base_url_box_is_wide(staff: Client) -> None:
    html = staff.get("/admin/agents_app/chatmodel/add/").content.decode()
    assert '<input type="url" name="base_url" size="70"' in html


def test_agent_and_conversation_pages_link_their_calls(staff: Client, tenant: Any) -> None:
    agent = Agent.objects.create(tenant=tenant, name="helper")
    user = UserFactory(username="carl")
    talk = Conversation.objects.create(tenant=tenant, agent=agent, user=user, title="stock questions")
    other = Conversation.objects.create(tenant=tenant, agent=agent, user=user, title="another")
    tool = ToolFactory(tenant=tenant, name="inv")
    for conversation in (talk, talk, other):
        ToolCall.objects.create(tenant=tenant, tool=tool, tool_name="inv", function="get", agent=agent,
                                conversation=conversation, via="chat", status=CallStatus.OK)
    page = staff.get(f"/admin/agents_app/agent/{agent.pk}/change/").content.decode()
    assert f'href="/admin/tools_app/toolcall/?agent__id__exact={agent.pk}" id="toolhub-agent-calls"' in page
    assert f'href="/admin/agents_app/conversation/?agent__id__exact={agent.pk}"' in page
    assert staff.get(f"/admin/tools_app/toolcall/?agent__id__exact={agent.pk}").context["cl"].result_count == 3
    page = staff.get(f"/admin/agents_app/conversation/{talk.pk}/change/").content.decode()
    link = f'href="/admin/tools_app/toolcall/?conversation__id__exact={talk.pk}" id="toolhub-conversation-calls">2 calls</a>'
    assert link in page and f'href="/admin/agents_app/agent/{agent.pk}/change/"' in page
    calls = staff.get(f"/admin/tools_app/toolcall/?conversation__id__exact={talk.pk}")
    assert calls.status_code == 200 and calls.context["cl"].result_count == 2
