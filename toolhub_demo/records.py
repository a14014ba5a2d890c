"""The demo's record models made reachable by agents, its saved queries, and the seed of their rows."""

from __future__ import annotations

import datetime
from typing import Any

from tenants_app.models import Tenant
from tools_app import records
from tools_app.runtime.builtins.sql_demo import CUSTOMERS, ORDERS, PRODUCTS


def register_demo_records() -> None:
    from toolhub_demo.models import Customer, Order, Product

    records.register(Customer, fields=["name", "email", "city", "created_at"], search_fields=["name", "email", "city"])
    records.register(Product, fields=["sku", "name", "price_cents", "stock"], search_fields=["sku", "name"])
    records.register(Order, fields=["customer", "product", "quantity", "status", "ordered_at"])
    records.register_query("orders_by_status", {
        "model": "order", "group_by": ["status"],
        "aggregates": [{"fn": "count", "as": "orders"}, {"fn": "sum", "field": "quantity", "as": "units"}],
        "ordering": ["status"],
    }, description="How many orders (and units) are in each status")
    records.register_query("stock_by_product", {
        "model": "product", "fields": ["sku", "name", "stock"], "ordering": ["-stock"],
    }, description="Stock on hand per product, most first")


def seed_records(tenant: Tenant, user: Any) -> list[str]:
    """The SQL demo database's customers, products and orders, once per tenant (ids are the tenant's own)."""
    from toolhub_demo.models import Customer, Order, Product

    if Customer.objects.filter(tenant=tenant).exists():
        return []
    customers = {row[0]: Customer.objects.create(tenant=tenant, name=row[1], email=row[2], city=row[3],
                                                 created_at=datetime.date.fromisoformat(row[4])) for row in CUSTOMERS}
    products = {row[0]: Product.objects.create(tenant=tenant, sku=row[1], name=row[2], price_cents=row[3],
                                               stock=row[4]) for row in PRODUCTS}
    for row in ORDERS:
        Order.objects.create(tenant=tenant, customer=customers[row[1]], product=products[row[2]], quantity=row[3],
                             status=row[4], ordered_at=datetime.date.fromisoformat(row[5]))
    return [f"  Demo records: {len(CUSTOMERS)} customers, {len(PRODUCTS)} products, {len(ORDERS)} orders "
            "(query_records, show_data)"]
