"""GET /tools/ warm from process memory: no query for a page seen before, the same body (links built for each
request), and every change to the tenant's tools (API, health, another tenant's untouched) on the very next list."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import ToolFactory
from tools_app.models import Tool
from tools_app.services import breaker

pytestmark = pytest.mark.django_db


@pytest.fixture
def tools(tenant: Any) -> list[Tool]:
    return [ToolFactory(tenant=tenant, name=f"zz{i:02d}") for i in range(20)]


def listing(client: Any, query: str = "") -> dict[str, Any]:
    resp = client.get(f"/api/v1/tools/{query}")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


def names(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body["results"]]


def test_a_warm_list_reads_no_database_and_answers_the_same(api: Any, tools: list[Tool],
                                                             django_assert_num_queries: Any) -> None:
    with CaptureQueriesContext(connection) as ctx:
        cold = listing(api, "?name=zz&page_size=5&page=2")
    assert not [q for q in ctx.captured_queries if "tools_app_toolfunction" in q["sql"]]  # the list shows none
    with django_assert_num_queries(0):
        warm = listing(api, "?name=zz&page_size=5&page=2")
    assert warm == cold
    assert names(warm) == [f"zz{i:02d}" for i in range(5, 10)] and warm["count"] == 20
    assert "page=3" in warm["next"] and "page_size=5" in warm["next"] and warm["previous"]
    assert "factory-secret" not in str(warm) and warm["results"][0]["config_set"] is True


def test_each_query_is_its_own_page(api: Any, tools: list[Tool]) -> None:
    assert names(listing(api, "?name=zz&page_size=5")) == [f"zz{i:02d}" for i in range(5)]
    assert names(listing(api, "?name=zz&page_size=5&page=2"))[0] == "zz05"
    assert names(listing(api, "?name=zz07")) == ["zz07"]
    assert api.get("/api/v1/tools/?page=99").status_code == 404


def test_changes_show_on_the_next_list(api: Any, tools: list[Tool]) -> None:
    first = listing(api, "?name=zz0")
    assert len(first["results"]) == 10
    resp = api.patch(f"/api/v1/tools/{tools[0].pk}/", {"description": "second"}, format="json")
    assert resp.status_code == 200, resp.content
    assert listing(api, "?name=zz0")["results"][0]["description"] == "second"
    assert api.put(f"/api/v1/tools/{tools[1].pk}/status/", {"status": "DISABLED"}, format="json").status_code == 200
    assert listing(api, "?name=zz0")["results"][1]["status"] == "DISABLED"
    breaker.record_outcome(tool_id=tools[2].pk, ok=False, error="connection refused")  # bulk update, no signal
    failed = listing(api, "?name=zz0")["results"][2]
    assert failed["consecutive_failures"] == 1 and failed["last_error"] == "connection refused"
    Tool.objects.filter(pk=tools[3].pk).update(name="renamed")  # a queryset update, no signal
    assert "zz03" not in names(listing(api, "?name=zz0"))
    assert api.delete(f"/api/v1/tools/{tools[4].pk}/").status_code == 204
    assert "zz04" not in names(listing(api, "?name=zz0"))
    ToolFactory(tenant=tools[0].tenant, name="zz0new")
    assert "zz0new" in names(listing(api, "?name=zz0"))


def test_another_tenant_lists_its_own_tools(api: Any, other_api: Any, other_tenant: Any, tools: list[Tool]) -> None:
    ToolFactory(tenant=other_tenant, name="theirs")
    assert "theirs" not in names(listing(api, "?page_size=100"))
    theirs = names(listing(other_api, "?page_size=100"))
    assert "theirs" in theirs and "zz00" not in theirs
