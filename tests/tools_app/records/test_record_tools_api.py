"""The record tools through POST /api/v1/tools/{id}/invoke/: batches, rollback, before/after, missing ids,
permissions (model, object-only, other tenant) and strict input, each call audited."""

from __future__ import annotations

from typing import Any

import pytest
from guardian.shortcuts import assign_perm

from tenants_app.models import Role
from tests.conftest import make_client
from toolhub_demo.models import Customer, Order, Product
from tools_app.models import Approval, CallStatus, Tool, ToolCall, ToolStatus, ToolType

pytestmark = pytest.mark.django_db

ALL = ("view", "add", "change", "delete")


def record_tool(tenant: Any, name: str) -> Tool:
    tool = Tool.objects.get(tenant=tenant, type=ToolType.BUILTIN, name=name)
    if tool.status != ToolStatus.ENABLED:
        tool.status = ToolStatus.ENABLED
        tool.save(update_fields=["status"])
    return tool


def invoke(client: Any, tenant: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    tool = record_tool(tenant, name)
    resp = client.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": name, "arguments": arguments}, format="json")
    assert resp.status_code == 200, resp.content
    return dict(resp.json())


@pytest.fixture
def clerk(tenant: Any, demo_rows: Any, user_with: Any) -> Any:
    """A member holding every model permission on the demo models."""
    user = user_with(*[f"{a}_{m}" for a in ALL for m in ("customer", "product", "order")], username="clerk")
    return make_client(user, tenant.slug)


def new_products(n: int, prefix: str = "N") -> list[dict[str, Any]]:
    return [{"sku": f"{prefix}-{i:03d}", "name": f"Part {i}", "price_cents": 100 + i, "stock": i} for i in range(n)]


def test_record_tools_are_builtin_rows_with_safety(tenant: Any) -> None:
    rows = {t.name: t for t in Tool.objects.filter(tenant=tenant, type=ToolType.BUILTIN)}
    assert {rows[n].safety for n in ("query_records", "read_record", "show_data")} == {"READ_ONLY"}
    assert rows["create_record"].safety == rows["update_record"].safety == "WRITE"
    assert rows["delete_record"].safety == "DESTRUCTIVE" and rows["delete_record"].requires_approval
    assert rows["create_record"].status == ToolStatus.DISABLED and rows["query_records"].status == ToolStatus.ENABLED


@pytest.mark.parametrize("size", [1, 100])
def test_create_batches_of_1_and_100(tenant: Any, clerk: Any, size: int) -> None:
    before = Product.objects.filter(tenant=tenant).count()
    body = invoke(clerk, tenant, "create_record", {"model": "product", "records": new_products(size)})
    assert body["success"], body
    assert body["data"]["created"] == size and len(body["data"]["records"]) == size
    assert Product.objects.filter(tenant=tenant).count() == before + size
    assert ToolCall.objects.get(pk=body["call_id"]).status == CallStatus.OK


def test_a_batch_of_101_is_refused_whole(tenant: Any, clerk: Any) -> None:
    before = Product.objects.count()
    body = invoke(clerk, tenant, "create_record", {"model": "product", "records": new_products(101)})
    assert not body["success"] and body["error_code"] == "INVALID_PARAMS"
    assert "100" in body["error"]
    assert Product.objects.count() == before


def test_a_bad_item_in_the_middle_rolls_back_the_whole_batch(tenant: Any, clerk: Any) -> None:
    before = Product.objects.count()
    batch = new_products(100)
    batch[50]["sku"] = "KB-01"  # taken: items 0..49 are written before the database refuses item 50
    body = invoke(clerk, tenant, "create_record", {"model": "product", "records": batch})
    assert not body["success"] and body["error_code"] == "BUSINESS_ERROR"
    assert body["error"].startswith("records[50]: the database refused it")
    assert Product.objects.count() == before
    batch[50]["sku"], batch[50]["price_cents"] = "N-050", -5
    body = invoke(clerk, tenant, "create_record", {"model": "product", "records": batch})
    assert not body["success"] and body["error_code"] == "INVALID_PARAMS"
    assert body["error"].startswith("records[50]: field 'price_cents':")
    assert Product.objects.count() == before


def test_update_answers_before_and_after_as_stored(tenant: Any, clerk: Any) -> None:
    orders = list(Order.objects.filter(tenant=tenant).order_by("pk"))
    body = invoke(clerk, tenant, "update_record", {"model": "order", "records": [
        {"id": orders[0].pk, "status": "cancelled"}, {"id": orders[2].pk, "quantity": 4, "status": "shipped"}]})
    assert body["success"], body
    assert body["data"]["records"] == [
        {"id": orders[0].pk, "changes": {"status": {"before": "shipped", "after": "cancelled"}}},
        {"id": orders[2].pk, "changes": {"quantity": {"before": 1, "after": 4},
                                         "status": {"before": "pending", "after": "shipped"}}},
    ]
    assert Order.objects.get(pk=orders[2].pk).quantity == 4


def test_update_of_a_missing_id_rolls_back_and_names_it(tenant: Any, clerk: Any) -> None:
    first = Order.objects.filter(tenant=tenant).order_by("pk").first()
    assert first is not None
    body = invoke(clerk, tenant, "update_record", {"model": "order", "records": [
        {"id": first.pk, "quantity": 9}, {"id": 987654, "quantity": 1}]})
    assert (body["success"], body["error_code"]) == (False, "NOT_FOUND")
    assert body["error"].startswith("records[1]: no order record found with id 987654")
    assert Order.objects.get(pk=first.pk).quantity != 9


def test_read_and_delete_list_missing_ids(tenant: Any, other_tenant: Any, clerk: Any) -> None:
    mine = list(Order.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True))
    foreign = Order.objects.filter(tenant=other_tenant).values_list("pk", flat=True)[0]
    read = invoke(clerk, tenant, "read_record", {"model": "order", "ids": [mine[0], foreign, 424242]})
    assert [r["id"] for r in read["data"]["records"]] == [mine[0]]
    assert read["data"]["missing"] == [foreign, 424242]
    # Another tenant's row is reported exactly like an id that never existed.
    assert invoke(clerk, tenant, "read_record", {"model": "order", "id": foreign})["data"] == {
        "model": "order", "record": None, "missing": [foreign]}
    body = invoke(clerk, tenant, "delete_record", {"model": "order", "ids": [mine[0], foreign, 424242]})
    assert body["error_code"] == "APPROVAL_REQUIRED", body
    approval = Approval.objects.get(pk=body["approval_id"])
    assert approval.count == 1
    assert approval.summary == (f"Delete 1 order record (2 id(s) match nothing and are skipped: [{foreign}, 424242]): "
                                f"{Order.objects.get(pk=mine[0])}")
    decided = clerk.post(f"/api/v1/approvals/{approval.pk}/approve/", format="json").json()
    result = decided.get("result") or decided
    assert Order.objects.filter(pk=mine[0]).count() == 0, decided
    assert Order.objects.filter(pk=foreign).count() == 1
    assert ToolCall.objects.filter(tool__name="delete_record", status=CallStatus.OK).count() == 1, result


def test_no_model_permission_is_a_denial_naming_operation_and_model(tenant: Any, demo_rows: Any,
                                                                    user_with: Any) -> None:
    client = make_client(user_with("view_order"), tenant.slug)
    body = invoke(client, tenant, "create_record", {"model": "order", "record": {"quantity": 1}})
    assert not body["success"] and body["error_code"] == "BUSINESS_ERROR"
    assert body["error"] == "you may not create order records (no toolhub_demo.add_order permission)"
    body = invoke(client, tenant, "query_records", {"model": "customer"})
    assert body["error"] == "you may not read customer records (no toolhub_demo.change_customer permission)"


def test_object_permission_only(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with()
    client = make_client(user, tenant.slug)
    ids = list(Order.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True))
    assign_perm("toolhub_demo.view_order", user, Order.objects.get(pk=ids[0]))
    assign_perm("toolhub_demo.change_order", user, Order.objects.get(pk=ids[1]))
    listed = invoke(client, tenant, "query_records", {"model": "order"})
    assert [r["id"] for r in listed["data"]["rows"]] == ids[:2] and listed["data"]["count"] == 2
    refused = invoke(client, tenant, "update_record", {"model": "order", "record": {"id": ids[0], "quantity": 5}})
    assert refused["error_code"] == "BUSINESS_ERROR" and f"you may not change order {ids[0]} (" in refused["error"]
    hidden = invoke(client, tenant, "update_record", {"model": "order", "record": {"id": ids[3], "quantity": 5}})
    assert hidden["error_code"] == "NOT_FOUND" and hidden["error"].startswith(f"record: no order record found with id {ids[3]}")
    done = invoke(client, tenant, "update_record", {"model": "order", "record": {"id": ids[1], "quantity": 5}})
    assert done["data"]["record"]["changes"]["quantity"]["after"] == 5


def test_strict_input_refusals_name_what_the_model_has(tenant: Any, clerk: Any) -> None:
    unknown = invoke(clerk, tenant, "create_record", {"model": "customer", "record": {"nickname": "Ada"}})
    assert unknown["error"] == ("record: customer has no field(s) 'nickname'; "
                                "writable fields: name, email, city, created_at")
    choice = invoke(clerk, tenant, "query_records", {"model": "order", "filter": {
        "field": "status", "op": "eq", "value": "lost"}})
    assert choice["error"] == "filter.value: 'lost' is not a choice of field 'status'; choices: ['pending', 'shipped', 'cancelled']"
    op = invoke(clerk, tenant, "query_records", {"model": "order", "filter": {
        "and": [{"field": "ordered_at", "op": "contains", "value": "2025"}]}})
    assert op["error"] == ("filter.and[0]: operator 'contains' does not apply to date field 'ordered_at'; "
                           "it takes eq, ne, lt, lte, gt, gte, in, isnull")
    model = invoke(clerk, tenant, "read_record", {"model": "invoice", "id": 1})
    assert model["error"] == "no record model named 'invoice'; models: customer, order, product"
    both = invoke(clerk, tenant, "read_record", {"model": "order", "id": 1, "ids": [1]})
    assert both["error"] == "pass 'id' or 'ids', not both"
    assert all(b["error_code"] == "INVALID_PARAMS" for b in (unknown, choice, op, model, both))


def test_query_filters_nested_and_or(tenant: Any, clerk: Any) -> None:
    body = invoke(clerk, tenant, "query_records", {
        "model": "product", "ordering": ["-price_cents"], "fields": ["sku", "price_cents"], "limit": 2,
        "filter": {"or": [{"field": "stock", "op": "eq", "value": 0},
                          {"and": [{"field": "price_cents", "op": "gte", "value": 5000},
                                   {"field": "name", "op": "contains", "value": "MONITOR"}]}]}})
    assert body["success"], body
    assert body["data"]["rows"] == [{"sku": "MN-27", "price_cents": 27900}, {"sku": "DK-10", "price_cents": 15900}]
    assert body["data"]["count"] == 2 and body["data"]["more"] is False
    too_many = invoke(clerk, tenant, "query_records", {"model": "product", "limit": 101})
    assert too_many["error_code"] == "INVALID_PARAMS" and "limit" in too_many["error"]


def test_other_tenant_rows_are_invisible_to_queries(tenant: Any, other_tenant: Any, clerk: Any) -> None:
    Customer.objects.filter(tenant=other_tenant).update(city="Elsewhere")
    body = invoke(clerk, tenant, "query_records", {"model": "customer", "filter": {
        "field": "city", "op": "eq", "value": "Elsewhere"}})
    assert body["data"]["count"] == 0 and body["data"]["rows"] == []


def test_member_without_any_record_permission_keeps_the_tenants_admin_role_out(tenant: Any, demo_rows: Any,
                                                                                member_client: Any) -> None:
    # A tenant admin role is not a Django model permission: records stay closed without one.
    admin = member_client(tenant, Role.ADMIN)
    body = invoke(admin, tenant, "read_record", {"model": "customer", "id": 1})
    assert body["error_code"] == "BUSINESS_ERROR" and body["error"].startswith("you may not read customer records")


def test_dry_run_of_a_batch_changes_nothing_and_says_what_would(tenant: Any, clerk: Any) -> None:
    before = Product.objects.count()
    tool = record_tool(tenant, "create_record")
    resp = clerk.post(f"/api/v1/tools/{tool.pk}/invoke/", {"function": "create_record", "dry_run": True,
                                                            "arguments": {"model": "product", "records": new_products(3)}},
                      format="json")
    body = resp.json()
    assert body["success"] and body["data"]["created"] == 3, body
    assert Product.objects.count() == before
    assert [c["action"] for c in body["changes"]["objects"] if c["model"] == "toolhub_demo.product"] == ["created"] * 3


def test_a_delete_the_user_may_not_fully_do_is_refused_before_anyone_is_asked(tenant: Any, demo_rows: Any,
                                                                               user_with: Any) -> None:
    user = user_with("view_order")
    ids = list(Order.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True))
    assign_perm("toolhub_demo.delete_order", user, Order.objects.get(pk=ids[0]))
    body = invoke(make_client(user, tenant.slug), tenant, "delete_record", {"model": "order", "ids": ids[:2]})
    assert not body["success"] and body.get("approval_id") is None, body
    assert f"you may not delete order {ids[1]} (" in body["error"]
    assert not Approval.objects.exists() and Order.objects.filter(pk__in=ids[:2]).count() == 2
