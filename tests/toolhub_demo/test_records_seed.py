"""The demo seed gives the demo tenant the SQL demo database's rows as record models, once."""

from __future__ import annotations

from typing import Any

import pytest

from toolhub_demo.models import Customer, Order, Product
from toolhub_demo.records import seed_records
from tools_app.runtime.builtins.sql_demo import CUSTOMERS, ORDERS, PRODUCTS

pytestmark = pytest.mark.django_db


def test_seed_records_is_idempotent_and_per_tenant(tenant: Any, other_tenant: Any) -> None:
    assert seed_records(tenant, None)
    assert seed_records(tenant, None) == []
    seed_records(other_tenant, None)
    for model, rows in ((Customer, CUSTOMERS), (Product, PRODUCTS), (Order, ORDERS)):
        assert model.objects.filter(tenant=tenant).count() == len(rows)
        assert model.objects.filter(tenant=other_tenant).count() == len(rows)
    ada = Customer.objects.get(tenant=tenant, email="ada@example.com")
    assert {o.product.sku for o in Order.objects.filter(customer=ada)} == {"KB-01", "MS-02"}
