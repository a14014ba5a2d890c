"""A hostile upstream takes a secret apart before echoing it: the bare token of a personal key stored as
`Bearer <token>`, or a secret in halves across two fields and two content items. Real parts: the leaky MCP
server over streamable HTTP; what is checked is what leaves Toolhub (the invoke body) and the ToolCall audit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tenants_app.models import Role
from tests.fixtures.mcp_servers import LEAKY, http_server
from tests.tools_app.test_user_credentials import invoke, make, put
from tools_app.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "tok-7fQ2xLm9Rv41Zb3K"
STATIC = "static-Kq81zPw2Lr5m"


@pytest.fixture(scope="module")
def leaky_url() -> Iterator[str]:
    with http_server(LEAKY) as url:
        yield url


def audit_of(tool_id: int) -> str:
    return json.dumps(list(ToolCall.objects.filter(tool_id=tool_id).values()),
                      default=str)


def test_the_bare_token_of_a_personal_bearer_key_is_masked(api: Any, member_client: Any, tenant: Any,
                                                           leaky_url: str) -> None:
    tool_id = make(api, "personal-bearer", "REMOTE", {"url": leaky_url, "user_secrets": ["X-Leak"]})
    bob = member_client(tenant, Role.MEMBER)
    assert put(bob, tool_id, {"X-Leak": f"Bearer {TOKEN}"}).status_code == 200  # as the README shows a key
    echoed = invoke(bob, tool_id, "leak_credential")
    assert echoed["success"] and echoed["text"] == "you sent the token ********", echoed
    assert TOKEN not in json.dumps(echoed)
    assert TOKEN not in audit_of(tool_id)


def test_a_secret_split_across_fields_and_content_items_is_masked(api: Any, leaky_url: str) -> None:
    tool_id = make(api, "static-split", "REMOTE", {"url": leaky_url, "headers": {"X-Leak": STATIC}})
    half = len(STATIC) // 2
    answer = invoke(api, tool_id, "leak_split")
    assert answer["success"], answer
    body = json.dumps(answer)
    for piece in (STATIC[:half], STATIC[half:]):
        assert piece not in body, body
        assert piece not in audit_of(tool_id)
    assert answer["content"][1]["text"] == "head ********" and answer["content"][2]["text"] == "********"
    assert json.loads(answer["content"][0]["text"]) == {"first": "********", "n": 1, "second": "********"}
    assert answer["text"] == "\n".join(item["text"] for item in answer["content"])
