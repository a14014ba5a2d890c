"""Shared fixtures for the Django-free catalog tests: sample documents, a loopback server, a policy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.outbound import OutboundPolicy
from tests.fixtures.catalog_server import CatalogServer

CATALOGS = Path(__file__).resolve().parents[2] / "fixtures" / "catalogs"


def load(name: str) -> Any:
    return json.loads((CATALOGS / name).read_text())


@pytest.fixture
def server() -> Iterator[CatalogServer]:
    with CatalogServer() as srv:
        yield srv


@pytest.fixture
def policy() -> OutboundPolicy:
    return OutboundPolicy.build("127.0.0.0/8,::1", max_bytes=1024 * 1024, timeout_s=5)
