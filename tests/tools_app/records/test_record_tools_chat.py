"""The record tools and show_data through chat with the fake model: what the model asks, what it reads back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from guardian.shortcuts import assign_perm

from agents_app.models import Agent
from tests.agents_app.support import MODEL_KEY, chat, events, make_agent, make_model
from tests.conftest import make_client
from tests.fixtures.fake_llm import call, llm_servers, text
from toolhub_demo.models import Order, Product
from tools_app.models import Approval, ApprovalStatus, Tool, ToolStatus, ToolType

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ("query_records", "read_record", "create_record", "update_record", "delete_record", "show_data")
ALL = [f"{a}_{m}" for a in ("view", "add", "change", "delete") for m in ("customer", "product", "order")]


@pytest.fixture(autouse=True)
def _chat_settings(settings: Any) -> None:
    settings.TOOLHUB_MODEL_TIMEOUT_S = 5
    settings.TOOLHUB_DEMO_MODEL_URL = ""


@pytest.fixture
def start_llm(llm_hub: Any) -> Any:
    with llm_servers(MODEL_KEY, llm_hub) as start:
        yield start


def agent_for(api: Any, tenant: Any, llm: Any) -> int:
    ids = []
    for name in NAMES:
        tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name=name)
        Tool.objects.filter(pk=tool.pk).update(status=ToolStatus.ENABLED)
        ids.append({"tool": tool.pk})
    return make_agent(api, model=make_model(api, llm), tools=ids, name="records")


def fn(name: str) -> str:
    return f"{name}__{name}"


def parts(n: int, prefix: str) -> list[dict[str, Any]]:
    return [{"sku": f"{prefix}-{i:03d}", "name": f"Part {i}", "price_cents": 100 + i} for i in range(n)]


def results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return events(body, "tool.result")


def tool_messages(llm: Any) -> list[str]:
    """What the model read back for each tool call, from the last request it was sent."""
    return [m["content"] for m in llm.requests[-1]["messages"] if m.get("role") == "tool"]


def test_batches_of_1_100_101_and_a_bad_item_in_the_middle(tenant: Any, api: Any, demo_rows: Any, user_with: Any,
                                                            start_llm: Any) -> None:
    clerk = make_client(user_with(*ALL), tenant.slug)
    bad = parts(100, "BAD")
    bad[40]["price_cents"] = "free"
    llm = start_llm([
        call(fn("create_record"), {"model": "product", "record": parts(1, "ONE")[0]}),
        call(fn("create_record"), {"model": "product", "records": parts(100, "HUN")}),
        call(fn("create_record"), {"model": "product", "records": parts(101, "OVR")}),
        call(fn("create_record"), {"model": "product", "records": bad}),
        text("four batches tried"),
    ], repeat_last=False)
    body = chat(clerk, agent_for(api, tenant, llm), "add the parts")
    got = results(body)
    assert [r["success"] for r in got] == [True, True, False, False], got
    assert "100" in got[2]["error"]
    assert got[3]["error"].startswith("records[40]: field 'price_cents' takes an integer")
    assert Product.objects.filter(tenant=tenant, sku__startswith="HUN-").count() == 100
    assert not Product.objects.filter(sku__startswith="OVR-").exists()
    assert not Product.objects.filter(sku__startswith="BAD-").exists()
    seen = tool_messages(llm)
    assert seen[1].startswith('{"model":"product","created":100,"records":[{"id":') and "truncated" not in seen[1]
    assert seen[3].startswith("Error (INVALID_PARAMS): records[40]")
    assert body["message"] == "four batches tried"


def test_update_read_and_query_as_the_model_reads_them(tenant: Any, other_tenant: Any, api: Any, demo_rows: Any,
                                                        user_with: Any, start_llm: Any) -> None:
    clerk = make_client(user_with(*ALL), tenant.slug)
    ids = list(Order.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True))
    foreign = Order.objects.filter(tenant=other_tenant).values_list("pk", flat=True)[0]
    llm = start_llm([
        call(fn("update_record"), {"model": "order", "record": {"id": ids[2], "status": "shipped", "quantity": 2}}),
        call(fn("read_record"), {"model": "order", "ids": [ids[2], foreign, 777777], "fields": ["status"]}),
        call(fn("query_records"), {"model": "order", "group_by": ["status"], "ordering": ["status"]}),
        text("done"),
    ], repeat_last=False)
    body = chat(clerk, agent_for(api, tenant, llm), "ship order 3")
    assert all(r["success"] for r in results(body)), results(body)
    seen = [json.loads(s) for s in tool_messages(llm)]
    assert seen[0]["record"]["changes"] == {"status": {"before": "pending", "after": "shipped"},
                                            "quantity": {"before": 1, "after": 2}}
    assert seen[1]["records"] == [{"status": "shipped"}] and seen[1]["missing"] == [foreign, 777777]
    assert seen[2]["rows"] == [{"status": "cancelled", "count": 1}, {"status": "pending", "count": 1},
                               {"status": "shipped", "count": 4}]
    titles = [c.get("title") for c in events(body, "tool.call")]
    assert titles == ["update 1 order record", "read 3 order records", "query_records: order"], titles
    # provide_context: the models this user may read, with their fields, are in the system prompt.
    system = llm.requests[0]["messages"][0]["content"]
    assert "- order: id (integer), customer (reference), product (reference), quantity (integer), " \
           "status (text: pending|shipped|cancelled), ordered_at (date)" in system, system
    assert "- customer:" in system and "orders_by_status" in system


def test_permissions_in_chat(tenant: Any, api: Any, demo_rows: Any, user_with: Any, start_llm: Any) -> None:
    user = user_with("view_order")
    ids = list(Order.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True))
    assign_perm("toolhub_demo.change_order", user, Order.objects.get(pk=ids[1]))
    llm = start_llm([
        call(fn("create_record"), {"model": "order", "record": {"quantity": 1}}),
        call(fn("update_record"), {"model": "order", "record": {"id": ids[0], "quantity": 3}}),
        call(fn("update_record"), {"model": "order", "record": {"id": ids[1], "quantity": 3}}),
        call(fn("query_records"), {"model": "customer"}),
        text("ok"),
    ], repeat_last=False)
    body = chat(make_client(user, tenant.slug), agent_for(api, tenant, llm), "go")
    got = results(body)
    assert [r["success"] for r in got] == [False, False, True, False]
    assert got[0]["error"] == "you may not create order records (no toolhub_demo.add_order permission)"
    assert got[1]["error"].startswith(f"record: you may not change order {ids[0]} (")
    assert got[3]["error"].startswith("you may not read customer records")
    assert Order.objects.get(pk=ids[0]).quantity != 3 and Order.objects.get(pk=ids[1]).quantity == 3


def test_strict_input_in_chat_names_what_the_model_has(tenant: Any, api: Any, demo_rows: Any, user_with: Any,
                                                        start_llm: Any) -> None:
    clerk = make_client(user_with(*ALL), tenant.slug)
    llm = start_llm([
        call(fn("query_records"), {"model": "order", "filter": {"field": "total", "op": "gt", "value": 3}}),
        call(fn("create_record"), {"model": "order", "record": {"status": "lost"}}),
        text("sorry"),
    ], repeat_last=False)
    body = chat(clerk, agent_for(api, tenant, llm), "orders over 3")
    got = results(body)
    assert got[0]["error"] == ("filter: order has no field 'total'; fields: id, customer, product, quantity, "
                               "status, ordered_at")
    assert got[1]["error"] == ("record: 'lost' is not a choice of field 'status'; "
                               "choices: ['pending', 'shipped', 'cancelled']")


def test_delete_batch_is_one_approval_naming_records_and_count(tenant: Any, api: Any, demo_rows: Any,
                                                               user_with: Any, start_llm: Any) -> None:
    clerk = make_client(user_with(*ALL), tenant.slug)
    ids = list(Order.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True))
    llm = start_llm([call(fn("delete_record"), {"model": "order", "ids": [ids[0], ids[1], ids[3], 555555]}),
                     text("deleted three")], repeat_last=False)
    body = chat(clerk, agent_for(api, tenant, llm), "delete those")
    required = events(body, "approval.required")
    assert len(required) == 1, body
    card = required[0]["summary"] or ""
    assert "DESTRUCTIVE" in (required[0]["warning"] or "")
    assert "Delete 3 order records" in card and f"order {ids[3]}" in card and "555555" in card, card
    assert Order.objects.filter(pk__in=ids[:2]).count() == 2
    approval = Approval.objects.get(pk=required[0]["approval_id"])
    assert clerk.post(f"/api/v1/approvals/{approval.pk}/approve/").json()["status"] == ApprovalStatus.APPROVED
    resumed = clerk.post(f"/api/v1/conversations/{body['conversation_id']}/resume/", format="json").json()
    done = results(resumed)[0]
    assert done["success"], done
    assert json.loads(tool_messages(llm)[0]) == {"model": "order", "deleted": 3, "ids": [ids[0], ids[1], ids[3]],
                                                 "missing": [555555]}
    assert not Order.objects.filter(pk__in=[ids[0], ids[1], ids[3]]).exists()


def test_show_data_returns_rows_and_widget_the_model_reads_too(tenant: Any, api: Any, demo_rows: Any,
                                                               user_with: Any, start_llm: Any) -> None:
    clerk = make_client(user_with(*ALL), tenant.slug)
    llm = start_llm([
        call(fn("show_data"), {"query_name": "orders_by_status", "widget": "chart",
                               "props": {"type": "bar", "x": "status", "y": "orders", "title": "Orders"}}),
        call(fn("show_data"), {"query": {"model": "order"}, "widget": "chart",
                               "props": {"type": "pie", "x": "status", "y": "revenue"}}),
        text("Most orders are shipped."),
    ], repeat_last=False)
    body = chat(clerk, agent_for(api, tenant, llm), "orders by status, as a chart")
    shown, refused = results(body)
    assert shown["success"] and shown["shown"] and shown["data"]["widget"] == {
        "type": "chart", "props": {"type": "bar", "x": "status", "y": "orders", "title": "Orders"}}
    assert shown["data"]["rows"] == [{"status": "cancelled", "orders": 1, "units": 1},
                                        {"status": "pending", "orders": 2, "units": 4},
                                        {"status": "shipped", "orders": 3, "units": 4}]
    assert json.loads(tool_messages(llm)[0])["rows"] == shown["data"]["rows"]
    assert refused["error"].startswith("props.y: the query has no column(s) ['revenue']; columns: id, customer")
    assert body["message"] == "Most orders are shipped."


def test_models_the_user_cannot_read_stay_out_of_the_system_prompt(tenant: Any, api: Any, demo_rows: Any,
                                                                    user_with: Any, start_llm: Any) -> None:
    llm = start_llm([text("hello")])
    chat(make_client(user_with("view_product"), tenant.slug), agent_for(api, tenant, llm), "hi")
    system = llm.requests[0]["messages"][0]["content"]
    assert "- product: id (integer), sku (text)" in system and "- order:" not in system and "- customer:" not in system


def test_the_demo_model_answers_a_chart_request_with_show_data(tenant: Any, api: Any, demo_rows: Any,
                                                              user_with: Any, start_llm: Any, settings: Any) -> None:
    from toolhub_demo.agents import RECORDS_AGENT_NAME, seed_records_agent

    llm = start_llm(None, api_key=None)  # the rule-based demo model of `make run`
    settings.TOOLHUB_DEMO_MODEL_URL = llm.base_url
    assert seed_records_agent(tenant, api.user)
    agent = Agent.objects.get(tenant=tenant, name=RECORDS_AGENT_NAME)
    assert sorted(agent.agent_tools.values_list("tool__name", flat=True)) == ["query_records", "read_record",
                                                                               "show_data"]
    body = chat(make_client(user_with("view_order"), tenant.slug), agent.pk, "a chart of orders please")
    shown = results(body)[0]
    assert shown["shown"] and shown["data"]["widget"]["props"]["type"] == "bar", shown
    assert "The chart above shows the orders in each status" in body["message"]
