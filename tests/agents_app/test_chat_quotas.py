"""A quota refuses a chat's tool call with QUOTA_EXCEEDED in its tool.result event; the model reads why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents_app.support import builtin, chat, events, make_agent, make_model
from tests.fixtures.fake_llm import call, text
from tools_app.models import CallStatus, ToolCall
from tools_app.services import quotas

pytestmark = [pytest.mark.django_db(transaction=True)]

LIST = "list_directory__list_directory"


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    quotas._store.forget()
    yield
    quotas._store.forget()


def test_an_agent_quota_refuses_the_second_call_of_a_chat(tenant: Any, api: Any, start_llm: Any) -> None:
    tool = builtin(tenant, "list_directory")
    llm = start_llm([call(LIST, {"path": "."}), call(LIST, {"path": "."}), text("done")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool.pk}])
    made = api.post("/api/v1/quotas/", {"scope": "agent", "target": str(agent_id), "per_minute": 1}, format="json")
    assert made.status_code == 201, made.content
    body = chat(api, agent_id, "list twice")
    first, second = events(body, "tool.result")
    assert first["success"] is True
    assert second["success"] is False and second["error_code"] == "QUOTA_EXCEEDED"
    assert "quota exceeded" in llm.requests[2]["messages"][-1]["content"]
    refused = ToolCall.objects.filter(agent_id=agent_id, error_code="QUOTA_EXCEEDED").get()
    assert refused.status == CallStatus.DENIED
