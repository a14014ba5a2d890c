"""Chat with an OAuth tool that has no usable connection: the person gets an `authorization.required` event with
their own connect link, and after connecting, the next message reaches the tool."""

from __future__ import annotations

from typing import Any

import pytest

from tenants_app.models import Role
from tests.agents_app.support import chat, events, make_agent, make_model
from tests.fixtures.fake_llm import call, text
from tests.tools_app.test_oauth_connections import (  # noqa: F401 - server_url is a fixture
    connect_shared,
    discovered_then_disconnected,
    server_url,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_disconnected_oauth_tool_asks_the_person_to_connect_and_then_works(
        tenant: Any, member_client: Any, start_llm: Any, server_url: str) -> None:  # noqa: F811
    api = member_client(tenant, Role.ADMIN)
    tool_id, function = discovered_then_disconnected(api, server_url)
    llm = start_llm([call(f"linear__{function}", {}), text("connect it first"),
                     call(f"linear__{function}", {}), text("done")])
    agent_id = make_agent(api, model=make_model(api, llm), tools=[{"tool": tool_id}])

    body = chat(api, agent_id, "use linear")
    (needed,) = events(body, "authorization.required")
    assert needed["tool"] == "linear" and needed["function"] == function
    assert "/oauth/start/" in needed["authorize_url"]
    assert events(body, "tool.result")[0]["error_code"] == "AUTHORIZATION_REQUIRED"

    connect_shared(api, tool_id)  # the person follows a link and signs in
    again = chat(api, agent_id, "try again", conversation_id=body["conversation_id"])
    assert not events(again, "authorization.required")
    assert events(again, "tool.result")[0]["success"] is True
