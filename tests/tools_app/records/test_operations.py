"""The record operations as services: batches, missing ids, permissions, strict input, tenant isolation."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Q
from guardian.shortcuts import assign_perm

from core.codes import ApiCode
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
    with pytest.raises(InvalidParams) as wrong_type:
        ops.create_records(tenant=tenant, user=user, model="product", records=batch)
    assert wrong_type.value.code == ApiCode.INVALID_PARAMS
    assert wrong_type.value.details == {"field": "price_cents", "expected": "integer"}
    assert wrong_type.value.message.startswith("records[2]: ")  # names the item of the batch
    batch[2]["price_cents"] = 5
    batch[3]["sku"] = "KB-01"  # taken in this tenant: the database refuses item 3 after 0..2 were written
    with pytest.raises(BusinessError) as refused:
        ops.create_records(tenant=tenant, user=user, model="product", records=batch)
    assert refused.value.code == ApiCode.BUSINESS_ERROR and refused.value.details == {"index": 3}
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
    writable = ["customer", "product", "quantity", "status", "ordered_at"]
    with pytest.raises(InvalidParams) as unknown:
        ops.create_records(tenant=tenant, user=user, model="order", record={**good, "colour": "red"})
    assert unknown.value.code == ApiCode.INVALID_PARAMS
    assert unknown.value.details == {"unknown": ["colour"], "accepted": writable}
    with pytest.raises(InvalidParams) as not_a_choice:
        ops.create_records(tenant=tenant, user=user, model="order", record={**good, "status": "lost"})
    assert not_a_choice.value.code == ApiCode.INVALID_PARAMS and not_a_choice.value.details["field"] == "status"
    assert not_a_choice.value.details["choices"][0] == "pending" and "lost" not in not_a_choice.value.details["choices"]
    with pytest.raises(InvalidParams) as read_only:
        ops.create_records(tenant=tenant, user=user, model="order", record={**good, "id": 5})
    assert read_only.value.code == ApiCode.INVALID_PARAMS
    assert read_only.value.details == {"read_only": ["id"], "accepted": writable}
    foreign = Customer.objects.filter(tenant=other_tenant).first()
    assert foreign is not None
    with pytest.raises(InvalidParams) as foreign_reference:
        ops.create_records(tenant=tenant, user=user, model="order", record={**good, "customer": foreign.pk})
    assert foreign_reference.value.code == ApiCode.INVALID_PARAMS
    assert foreign_reference.value.details == {"field": "customer", "id": foreign.pk}
    with pytest.raises(InvalidParams) as no_model:
        ops.create_records(tenant=tenant, user=user, model="invoice", record=good)
    assert no_model.value.code == ApiCode.INVALID_PARAMS
    assert no_model.value.details["model"] == "invoice"
    assert no_model.value.details["accepted"][:3] == ["customer", "order", "product"]
    with pytest.raises(InvalidParams) as both:
        ops.create_records(tenant=tenant, user=user, model="order", record=good, records=[good])
    assert both.value.code == ApiCode.INVALID_PARAMS and both.value.details == {"conflicting": ["record", "records"]}
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
    with pytest.raises(RecordNotFound) as missing:
        ops.update_records(tenant=tenant, user=user, model="order",
                           records=[{"id": ids[0], "quantity": 9}, {"id": 999999, "quantity": 1}])
    assert missing.value.code == ApiCode.RECORD_NOT_FOUND and missing.value.details == {"index": 1, "id": 999999}
    assert Order.objects.get(pk=ids[0]).quantity != 9


def test_object_permissions_only(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with()
    ids = order_ids(tenant)
    with pytest.raises(PermissionRefused) as no_read:
        ops.read_records(tenant=tenant, user=user, model="order", ids=ids)
    assert no_read.value.code == ApiCode.PERMISSION_DENIED
    assert no_read.value.details == {"reason": "permission_denied", "model": "order", "operation": "read"}
    readable, changeable = Order.objects.get(pk=ids[0]), Order.objects.get(pk=ids[1])
    assign_perm("toolhub_demo.view_order", user, readable)
    assign_perm("toolhub_demo.change_order", user, changeable)
    out = ops.read_records(tenant=tenant, user=user, model="order", ids=ids)
    assert [r["id"] for r in out["records"]] == ids[:2] and out["missing"] == ids[2:]
    # Readable but not changeable: refused by name. Not readable: exactly like a missing id.
    with pytest.raises(PermissionRefused) as no_change:
        ops.update_records(tenant=tenant, user=user, model="order", record={"id": ids[0], "quantity": 2})
    assert no_change.value.code == ApiCode.PERMISSION_DENIED
    assert no_change.value.details == {"index": 0, "id": ids[0], "reason": "permission_denied"}
    assert f"order {ids[0]} (1 × product " in no_change.value.message  # names the record as the model shows it
    with pytest.raises(RecordNotFound) as unreadable:
        ops.update_records(tenant=tenant, user=user, model="order", record={"id": ids[2], "quantity": 2})
    assert unreadable.value.code == ApiCode.RECORD_NOT_FOUND and unreadable.value.details == {"index": 0, "id": ids[2]}
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
    with pytest.raises(PermissionRefused) as no_delete:
        ops.delete_records(tenant=tenant, user=user, model="order", ids=[ids[0], ids[1]])
    assert no_delete.value.code == ApiCode.PERMISSION_DENIED
    assert no_delete.value.details == {"ids": [ids[1]], "reason": "permission_denied"}
    assert Order.objects.filter(pk__in=ids[:2]).count() == 2
    out = ops.delete_records(tenant=tenant, user=user, model="order", ids=[ids[0], 999999])
    assert out == {"model": "order", "deleted": 1, "ids": [ids[0]], "missing": [999999]}


def test_delete_without_model_permission_is_a_denial(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("view_order")
    with pytest.raises(PermissionRefused) as denial:
        ops.delete_records(tenant=tenant, user=user, model="order", id=order_ids(tenant)[0])
    assert denial.value.code == ApiCode.PERMISSION_DENIED
    assert denial.value.details == {"reason": "permission_denied", "model": "order", "operation": "delete"}


def test_delete_of_a_referenced_customer_is_refused(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("delete_customer", "view_customer")
    ada = Customer.objects.get(tenant=tenant, email="ada@example.com")
    with pytest.raises(BusinessError) as referenced:
        ops.delete_records(tenant=tenant, user=user, model="customer", id=ada.pk)
    assert referenced.value.code == ApiCode.BUSINESS_ERROR and referenced.value.details == {"reason": "referenced"}
    assert "orders" in referenced.value.message  # names what refers to it


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
    with pytest.raises(InvalidParams) as bad_op:
        run_query(tenant=tenant, user=user, query={"model": "order",
                                                   "filter": {"field": "quantity", "op": "contains", "value": "1"}})
    assert bad_op.value.code == ApiCode.INVALID_PARAMS
    assert bad_op.value.details["field"] == "quantity" and bad_op.value.details["op"] == "contains"
    assert "contains" not in bad_op.value.details["accepted"] and "gt" in bad_op.value.details["accepted"]
    with pytest.raises(InvalidParams) as no_field:
        run_query(tenant=tenant, user=user, query={"model": "order",
                                                   "filter": {"field": "total", "op": "gt", "value": 1}})
    assert no_field.value.code == ApiCode.INVALID_PARAMS and no_field.value.details["field"] == "total"
    assert no_field.value.details["accepted"][:3] == ["id", "customer", "product"]
    with pytest.raises(InvalidParams) as bad_ordering:
        run_query(tenant=tenant, user=user, query={"model": "order", "ordering": ["price"]})
    assert bad_ordering.value.code == ApiCode.INVALID_PARAMS and "price" not in bad_ordering.value.details["accepted"]
    assert "'price'" in bad_ordering.value.message  # names the refused ordering


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
        with pytest.raises(PermissionRefused) as outside:
            ops.update_records(tenant=tenant, user=user, model="order", record={"id": visible.pk,
                                                                                "status": "cancelled"})
        # the row filter's refusal: no "reason" detail (a missing permission carries reason permission_denied)
        assert outside.value.code == ApiCode.PERMISSION_DENIED and outside.value.details == {"index": 0, "id": visible.pk}
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
