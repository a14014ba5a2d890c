"""show_data as a service: saved or ad-hoc query as the user, capped at 100 rows, props checked per widget."""

from __future__ import annotations

from typing import Any

import pytest

from core.codes import ApiCode
from core.errors import InvalidParams
from toolhub_demo.models import Product
from tools_app.records.permissions import PermissionRefused
from tools_app.records.show_data import WIDGETS, show_data

pytestmark = pytest.mark.django_db


def test_saved_query_with_a_pie_chart(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    out = show_data(tenant=tenant, user=user_with("view_order"), query_name="orders_by_status", query=None,
                    widget="chart", props={"type": "pie", "x": "status", "y": "units"})
    assert out["columns"] == ["status", "orders", "units"] and out["count"] == 3
    assert out["widget"] == {"type": "chart", "props": {"type": "pie", "x": "status", "y": "units"}}
    assert out["query_name"] == "orders_by_status"


def test_ad_hoc_query_is_capped_at_100_rows(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    Product.objects.bulk_create([Product(tenant=tenant, sku=f"X-{i}", name=f"x{i}", price_cents=i, stock=i)
                                 for i in range(150)])
    out = show_data(tenant=tenant, user=user_with("view_product"), query_name=None,
                    query={"model": "product", "fields": ["sku", "stock"]}, widget="table", props={})
    assert len(out["rows"]) == 100 and out["count"] == 154 and out["more"] is True


def test_it_runs_as_the_user(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    with pytest.raises(PermissionRefused) as refused:
        show_data(tenant=tenant, user=user_with("view_product"), query_name="orders_by_status", query=None,
                  widget="kpi", props={"value": "orders"})
    assert refused.value.code == ApiCode.PERMISSION_DENIED
    assert refused.value.details == {"reason": "permission_denied", "model": "order", "operation": "read"}


@pytest.mark.parametrize(("widget", "props", "message"), [
    ("chart", {"type": "radar", "x": "status", "y": "orders"}, "props.type: 'radar' is not one of bar, line, pie"),
    ("chart", {"type": "bar", "x": "status"}, "props: chart needs 'y'"),
    ("kpi", {"value": "revenue"}, "props.value: the query has no column(s) ['revenue']; columns: status, orders, units"),
    ("table", {"colour": "red"}, "props: table takes no 'colour'; it takes columns, title"),
    ("progress", {"value": "orders", "max": "units", "label": ["status"]}, "props.label: one column name"),
    ("flow", {"step": "status", "stages": "pending"}, "props.stages: a list of strings"),
])
def test_props_are_read_strictly(tenant: Any, demo_rows: Any, user_with: Any, widget: str, props: dict[str, Any],
                                 message: str) -> None:
    with pytest.raises(InvalidParams) as exc:
        show_data(tenant=tenant, user=user_with("view_order"), query_name="orders_by_status", query=None,
                  widget=widget, props=props)
    assert exc.value.code == ApiCode.INVALID_PARAMS
    assert exc.value.message.startswith(message), exc.value.message  # names the prop and what it takes


def test_every_widget_accepts_its_documented_props(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("view_order")
    good: dict[str, dict[str, Any]] = {"chart": {"type": "line", "x": "status", "y": ["orders", "units"]}, "table": {"columns": ["status"]},
            "kpi": {"value": "orders", "label": "Orders"}, "card": {"title": "status", "fields": ["orders"]},
            "list": {"primary": "status", "secondary": "orders"},
            "progress": {"value": "orders", "max": 10, "label": "status"},
            "flow": {"step": "status", "value": "orders", "stages": ["pending", "shipped"]},
            "pivot": {"rows": "status", "columns": "orders", "value": "units", "agg": "sum"}}
    assert set(good) == set(WIDGETS)
    for widget, props in good.items():
        assert show_data(tenant=tenant, user=user, query_name="orders_by_status", query=None, widget=widget,
                         props=props)["widget"]["type"] == widget


def test_exactly_one_query(tenant: Any, demo_rows: Any, user_with: Any) -> None:
    user = user_with("view_order")
    with pytest.raises(InvalidParams) as neither:
        show_data(tenant=tenant, user=user, query_name=None, query=None, widget="table", props={})
    assert neither.value.code == ApiCode.INVALID_PARAMS
    assert neither.value.details == {"exactly_one_of": ["query_name", "query"]}
    with pytest.raises(InvalidParams) as unknown:
        show_data(tenant=tenant, user=user, query_name="nope", query=None, widget="table", props={})
    assert unknown.value.code == ApiCode.INVALID_PARAMS and "orders_by_status" in unknown.value.details["accepted"]
    assert "'nope'" in unknown.value.message  # names the unknown saved query
