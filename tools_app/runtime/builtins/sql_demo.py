"""A small SQLite demo database (customers, products, orders) that `make run` seeds for the SQL tools."""

from __future__ import annotations

import sqlite3
from pathlib import Path

DEFAULT_DEMO_TABLES: frozenset[str] = frozenset({"customers", "products", "orders"})

_SCHEMA = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    city TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    stock INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    status TEXT NOT NULL DEFAULT 'pending',
    ordered_at TEXT NOT NULL
);
"""

_CUSTOMERS = [
    (1, "Ada Lovelace", "ada@example.com", "London", "2025-01-05"),
    (2, "Grace Hopper", "grace@example.com", "New York", "2025-02-11"),
    (3, "Alan Turing", "alan@example.com", "Manchester", "2025-03-02"),
    (4, "Katherine Johnson", "katherine@example.com", "Hampton", "2025-03-20"),
]
_PRODUCTS = [
    (1, "KB-01", "Mechanical keyboard", 8900, 25),
    (2, "MS-02", "Wireless mouse", 2900, 80),
    (3, "MN-27", "27-inch monitor", 27900, 12),
    (4, "DK-10", "USB-C dock", 15900, 0),
]
_ORDERS = [
    (1, 1, 1, 1, "shipped", "2025-04-01"),
    (2, 1, 2, 2, "shipped", "2025-04-01"),
    (3, 2, 3, 1, "pending", "2025-04-03"),
    (4, 3, 2, 1, "cancelled", "2025-04-05"),
    (5, 4, 4, 3, "pending", "2025-04-07"),
    (6, 2, 1, 1, "shipped", "2025-04-09"),
]


# The same rows, for the demo's Django record models (toolhub_demo.records).
CUSTOMERS, PRODUCTS, ORDERS = tuple(_CUSTOMERS), tuple(_PRODUCTS), tuple(_ORDERS)


def create_demo_database(path: Path | str) -> Path:
    """Create (or recreate) the demo database at `path`; returns its absolute path."""
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.unlink()
    conn = sqlite3.connect(target)
    try:
        conn.executescript(_SCHEMA)
        conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?)", _CUSTOMERS)
        conn.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?)", _PRODUCTS)
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", _ORDERS)
        conn.commit()
    finally:
        conn.close()
    return target


def demo_url(path: Path | str) -> str:
    """The SqlTarget URL for a demo database file."""
    return f"sqlite:///{Path(path).resolve().as_posix().lstrip('/')}"
