"""A gateway call refused by a quota: an isError result carrying QUOTA_EXCEEDED and the quota's details."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents_app.gateway.clients import connect, refusal
from tools_app.services import quotas

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    quotas._store.forget()
    yield
    quotas._store.forget()


def test_a_member_quota_refuses_a_gateway_call_as_an_error_result(served: Any, setup: Any) -> None:
    made = setup.api.post("/api/v1/quotas/", {"scope": "member", "target": setup.api.user.username, "per_minute": 1},
                          format="json")
    assert made.status_code == 201, made.content

    async def scenario() -> tuple[Any, Any]:
        async with connect(served.endpoint("acme", setup.agent_id), setup.token) as (session, _):
            first = await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})
            second = await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})
            return first, second

    first, second = asyncio.run(scenario())
    assert not first.is_error
    assert second.is_error
    typed = refusal(second)
    assert typed["error_code"] == "QUOTA_EXCEEDED"
    assert typed["details"]["scope"] == "member" and typed["details"]["limit"] == "per_minute"
    assert typed["details"]["reset_at"]
    assert "QUOTA_EXCEEDED" in second.content[0].text
