"""The record operations as services: batches, missing ids, permissions, strict input, tenant isolation."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Q
from guardian.shortcuts import assign_perm

from core.errors import BusinessError, InvalidParams
from toolhub_demo.models import Customer, Order, Product
from tools_app import records
from tools_app.records import operations as ops
from tools_app.records.operations import RecordNotFound
from tools_app.records.permissions import PermissionRefused
from tools_app.records.query import run_query

pytestmark = pytest.mark.django_db


def order_ids(tenant: Any) -> list[int]:
    return list(Order.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True))


def test_read_lists_missing_and_hides_other_tenants(tenant: Any, other_tenant: Any, demo_rows: Any,
                                                   user_with: Any) -> None:
    user = user_with("view_order")
    mine = order_ids(tenant)
    foreign = order_ids(other_tenant)[0]
    out = ops.read_records(tenant=tenant, user=user, model="order", ids=[mine[0], foreign, 999999, mine[1]])
    assert [r["id"] for r in out["records"]] == [mine[0], mine[1]]
    assert out["missing"] == [foreign, 999999]
    single = ops.read_records(tenant=tenant, user=user, model="order", id=foreign)
    assert single == {"model": "order", "record": None, "missing": [foreign]}


def test_create_batch_is_all_or_nothing_and_names_the_index(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("add_product")
    before = Product.objects.count()
    batch = [{"sku": f"B-{i}", "name": f"Thing {i}", "price_cents": 100 + i} for i in range(5)]
    batch[2]["price_cents"] = "cheap"
    with pytest.raises(InvalidParams, match=r"records\[2\]: field 'price_cents' takes an integer"):
        ops.create_records(tenant=tenant, user=user, model="product", records=batch)
    batch[2]["price_cents"] = 5
    batch[3]["sku"] = "KB-01"  # taken in this tenant: the database refuses item 3 after 0..2 were written
    with pytest.raises(BusinessError, match=r"records\[3\]: the database refused it"):
        ops.create_records(tenant=tenant, user=user, model="product", records=batch)
    assert Product.objects.count() == before
    batch[3]["sku"] = "B-3"
    out = ops.create_records(tenant=tenant, user=user, model="product", records=batch)
    assert out["created"] == 5 and Product.objects.count() == before + 5
    assert {r["sku"] for r in out["records"]} == {f"B-{i}" for i in range(5)}


def test_create_refuses_unknown_fields_choices_and_foreign_references(tenant: Any, other_tenant: Any,
                                                                      demo_rows: Any, user_with: Any) -> None:
    user = user_with("add_order", "view_customer", "view_product")
    customer = Customer.objects.filter(tenant=tenant).first()
    product = Product.objects.filter(tenant=tenant).first()
    assert customer and product
    good = {"customer": customer.pk, "product": product.pk, "quantity": 1, "ordered_at": "2025-05-01"}
    with pytest.raises(InvalidParams, match=r"order has no field\(s\) 'colour'; writable fields: customer, product"):
        ops.create_records(tenant=tenant, user=user, model="order", record={**good, "colour": "red"})
    with pytest.raises(InvalidParams, match=r"'lost' is not a choice of field 'status'; choices: \['pending', "):
        ops.create_records(tenant=tenant, user=user, model="order", record={**good, "status": "lost"})
    with pytest.raises(InvalidParams, match=r"field\(s\) 'id' of order cannot be written"):
        ops.create_records(tenant=tenant, user=user, model="order", record={**good, "id": 5})
    foreign = Customer.objects.filter(tenant=other_tenant).first()
    assert foreign is not None
    with pytest.raises(InvalidParams, match=f"field 'customer': no customer record with id {foreign.pk}"):
        ops.create_records(tenant=tenant, user=user, model="order", record={**good, "customer": foreign.pk})
    with pytest.raises(InvalidParams, match="no record model named 'invoice'; models: customer, order, product"):
        ops.create_records(tenant=tenant, user=user, model="invoice", record=good)
    with pytest.raises(InvalidParams, match="not both"):
        ops.create_records(tenant=tenant, user=user, model="order", record=good, records=[good])
    created = ops.create_records(tenant=tenant, user=user, model="order", record=good)["record"]
    assert created["status"] == "pending" and created["customer"] == customer.pk


def test_update_answers_before_and_after(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("change_customer")
    ada = Customer.objects.get(tenant=tenant, email="ada@example.com")
    out = ops.update_records(tenant=tenant, user=user, model="customer",
                             record={"id": ada.pk, "city": "Paris", "created_at": "2025-01-06"})
    assert out["record"] == {"id": ada.pk, "changes": {"city": {"before": "London", "after": "Paris"},
                                                       "created_at": {"before": "2025-01-05", "after": "2025-01-06"}}}


def test_update_missing_id_rolls_back_the_batch(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("change_order")
    ids = order_ids(tenant)
    with pytest.raises(RecordNotFound, match=r"records\[1\]: no order record found with id 999999"):
        ops.update_records(tenant=tenant, user=user, model="order",
                           records=[{"id": ids[0], "quantity": 9}, {"id": 999999, "quantity": 1}])
    assert Order.objects.get(pk=ids[0]).quantity != 9


def test_object_permissions_only(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with()
    ids = order_ids(tenant)
    with pytest.raises(PermissionRefused, match="you may not read order records"):
        ops.read_records(tenant=tenant, user=user, model="order", ids=ids)
    readable, changeable = Order.objects.get(pk=ids[0]), Order.objects.get(pk=ids[1])
    assign_perm("toolhub_demo.view_order", user, readable)
    assign_perm("toolhub_demo.change_order", user, changeable)
    out = ops.read_records(tenant=tenant, user=user, model="order", ids=ids)
    assert [r["id"] for r in out["records"]] == ids[:2] and out["missing"] == ids[2:]
    # Readable but not changeable: refused by name. Not readable: exactly like a missing id.
    with pytest.raises(PermissionRefused, match=rf"record: you may not change order {ids[0]} \(1 × product "):
        ops.update_records(tenant=tenant, user=user, model="order", record={"id": ids[0], "quantity": 2})
    with pytest.raises(RecordNotFound, match=f"no order record found with id {ids[2]}"):
        ops.update_records(tenant=tenant, user=user, model="order", record={"id": ids[2], "quantity": 2})
    assert ops.update_records(tenant=tenant, user=user, model="order",
                              record={"id": ids[1], "quantity": 7})["record"]["changes"]["quantity"]["after"] == 7
    assert run_query(tenant=tenant, user=user, query={"model": "order"})["count"] == 2
    grouped = run_query(tenant=tenant, user=user, query={"model": "order", "group_by": ["status"],
                                                         "aggregates": [{"fn": "sum", "field": "quantity", "as": "n"}]})
    assert sum(r["n"] for r in grouped["rows"]) == 1 + 7  # only the two granted rows are aggregated


def test_delete_settles_every_id_first(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("view_order")
    ids = order_ids(tenant)
    assign_perm("toolhub_demo.delete_order", user, Order.objects.get(pk=ids[0]))
    with pytest.raises(PermissionRefused, match=f"you may not delete order {ids[1]}"):
        ops.delete_records(tenant=tenant, user=user, model="order", ids=[ids[0], ids[1]])
    assert Order.objects.filter(pk__in=ids[:2]).count() == 2
    out = ops.delete_records(tenant=tenant, user=user, model="order", ids=[ids[0], 999999])
    assert out == {"model": "order", "deleted": 1, "ids": [ids[0]], "missing": [999999]}


def test_delete_without_model_permission_is_a_denial(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("view_order")
    with pytest.raises(PermissionRefused, match="you may not delete order records"):
        ops.delete_records(tenant=tenant, user=user, model="order", id=order_ids(tenant)[0])


def test_delete_of_a_referenced_customer_is_refused(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("delete_customer", "view_customer")
    ada = Customer.objects.get(tenant=tenant, email="ada@example.com")
    with pytest.raises(BusinessError, match="other records .*orders.* refer to it; nothing was deleted"):
        ops.delete_records(tenant=tenant, user=user, model="customer", id=ada.pk)


def test_query_filter_ordering_grouping(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("view_order", "view_customer")
    q = {"model": "order", "filter": {"or": [{"field": "status", "op": "eq", "value": "shipped"},
                                             {"and": [{"field": "quantity", "op": "gte", "value": 3}]}]},
         "ordering": ["-quantity"], "fields": ["quantity", "status"]}
    out = run_query(tenant=tenant, user=user, query=q)
    assert out["count"] == 4 and out["rows"][0] == {"quantity": 3, "status": "pending"}
    grouped = run_query(tenant=tenant, user=user, query={
        "model": "order", "group_by": ["status"], "ordering": ["status"],
        "aggregates": [{"fn": "count", "as": "orders"}, {"fn": "sum", "field": "quantity", "as": "units"}]})
    assert grouped["rows"] == [{"status": "cancelled", "orders": 1, "units": 1},
                               {"status": "pending", "orders": 2, "units": 4},
                               {"status": "shipped", "orders": 3, "units": 4}]
    found = run_query(tenant=tenant, user=user, query={"model": "customer", "search": "ADA"})
    assert [r["name"] for r in found["rows"]] == ["Ada Lovelace"]
    with pytest.raises(InvalidParams, match="operator 'contains' does not apply to integer field 'quantity'"):
        run_query(tenant=tenant, user=user, query={"model": "order",
                                                   "filter": {"field": "quantity", "op": "contains", "value": "1"}})
    with pytest.raises(InvalidParams, match="order has no field 'total'; fields: id, customer, product"):
        run_query(tenant=tenant, user=user, query={"model": "order",
                                                   "filter": {"field": "total", "op": "gt", "value": 1}})
    with pytest.raises(InvalidParams, match="cannot order by 'price'"):
        run_query(tenant=tenant, user=user, query={"model": "order", "ordering": ["price"]})


def test_row_filter_narrows_reads_and_writes(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("view_order", "change_order")
    spec = records.get_record_model("order")
    records.register(Order, fields=list(spec.fields[1:]), row_filter=lambda u, t: ~Q(status="cancelled"))
    try:
        out = run_query(tenant=tenant, user=user, query={"model": "order"})
        assert out["count"] == 5 and all(r["status"] != "cancelled" for r in out["rows"])
        cancelled = Order.objects.get(tenant=tenant, status="cancelled")
        assert ops.read_records(tenant=tenant, user=user, model="order", id=cancelled.pk)["missing"] == [cancelled.pk]
        visible = Order.objects.filter(tenant=tenant, status="pending").first()
        assert visible is not None
        with pytest.raises(PermissionRefused, match="outside the records you may see"):
            ops.update_records(tenant=tenant, user=user, model="order", record={"id": visible.pk,
                                                                                "status": "cancelled"})
        assert Order.objects.get(pk=visible.pk).status == "pending"
    finally:
        records.register(Order, fields=list(spec.fields[1:]))


def test_ordering_and_grouping_by_a_reference_use_its_id(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("view_order")
    out = run_query(tenant=tenant, user=user, query={"model": "order", "fields": ["customer"],
                                                     "ordering": ["-customer"]})
    assert [r["customer"] for r in out["rows"]] == sorted((r["customer"] for r in out["rows"]), reverse=True)
    grouped = run_query(tenant=tenant, user=user, query={"model": "order", "group_by": ["customer"],
                                                         "ordering": ["customer"]})
    assert [r["count"] for r in grouped["rows"]] == [2, 2, 1, 1]
