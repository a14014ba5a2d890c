"""SQLite under concurrent writes: no "database is locked" 500s, the envelope if ever."""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, connections
from rest_framework.test import APIClient

from core.exceptions import exception_handler
from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.factories import MembershipFactory, TenantFactory, UserFactory
from tests.waiting import PROCESS_BOUND_S, scaled
from tools_app.models import Tool


def test_locked_database_maps_to_the_envelope_not_a_500() -> None:
    response = exception_handler(OperationalError("database is locked"), {})
    assert response is not None and response.status_code == 409
    assert response.data["error"]["code"] == "busy"
    assert response["Retry-After"] == "1"


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock")
@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_all_succeed() -> None:
    """Read-then-write transactions used to fail at the lock upgrade; IMMEDIATE ones wait their turn."""
    tenant = TenantFactory(slug="busy")
    user = UserFactory(username="busy-admin")
    MembershipFactory(tenant=tenant, user=user, role=Role.ADMIN)
    token = token_for_user(user=user)
    workers = 8
    barrier = threading.Barrier(workers)
    statuses: list[int] = []

    def create(i: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}", HTTP_X_TENANT="busy")
        try:
            barrier.wait(timeout=scaled(30))
            for j in range(3):
                body = {"name": f"t{i}-{j}", "type": "REMOTE", "config": {"url": "http://127.0.0.1:9/mcp"}}
                statuses.append(client.post("/api/v1/tools/", body, format="json").status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=PROCESS_BOUND_S)
    assert statuses == [201] * (workers * 3)
    assert Tool.objects.filter(tenant=tenant).exclude(type="BUILTIN").count() == workers * 3
