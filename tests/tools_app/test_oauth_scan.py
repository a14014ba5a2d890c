"""Nothing issued by an OAuth provider leaks: after a full connect, discovery, calls (one whose server echoes the
Authorization header back), Test and export, no access or refresh token appears in any API answer, audit row, admin
page, metrics output, log record or the database's stored bytes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from tenants_app.models import Role
from tests.factories import MembershipFactory, UserFactory
from tests.tools_app.test_oauth_connections import connect_shared, make_tool, server_url  # noqa: F401 - fixture
from tools_app.models import OAuthConnection, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def test_no_issued_token_appears_in_any_output(tenant: Any, member_client: Any, caplog: Any,
                                               server_url: str) -> None:  # noqa: F811
    caplog.set_level(logging.DEBUG)
    api = member_client(tenant, Role.ADMIN)
    tool_id = make_tool(api, server_url)
    outputs: list[str] = []
    connect_shared(api, tool_id)
    for path in (f"/api/v1/tools/{tool_id}/refresh/", f"/api/v1/tools/{tool_id}/test/"):
        outputs.append(api.post(path).content.decode())
    for function in ("whoami", "leak_token"):
        answer = api.post(f"/api/v1/tools/{tool_id}/invoke/", {"function": function, "arguments": {}}, format="json")
        assert answer.status_code == 200 and answer.json()["success"], answer.content
        outputs.append(answer.content.decode())
    assert "you sent me ********" in outputs[-1]  # the echoed token was there to leak, and was masked
    outputs += [api.get(f"/api/v1/tools/{tool_id}/").content.decode(), api.get("/api/v1/tools/").content.decode(),
                api.post("/api/v1/tools/export/", {"ids": [tool_id]}, format="json").content.decode(),
                api.get("/api/v1/tool-calls/").content.decode()]
    staff_user = UserFactory(username="ops", is_staff=True)
    MembershipFactory(tenant=tenant, user=staff_user, role=Role.ADMIN)
    staff = Client()
    staff.force_login(staff_user)
    for path in (f"/admin/tools_app/tool/{tool_id}/change/", "/admin/tools_app/toolcall/", "/admin/"):
        page = staff.get(path)
        assert page.status_code == 200, path
        outputs.append(page.content.decode())
    outputs.append(Client().get("/metrics").content.decode())
    outputs.append(str(list(ToolCall.objects.values())))
    outputs += [record.getMessage() + str(record.__dict__.get("args")) for record in caplog.records]
    with connection.cursor() as cursor:
        cursor.execute("SELECT tokens FROM tools_app_oauthconnection")
        outputs += [str(row[0]) for row in cursor.fetchall()]

    issued = OAuthConnection.objects.get(tool_id=tool_id).tokens or {}
    secrets = [v for k, v in issued.items() if k in ("access_token", "refresh_token") and isinstance(v, str)]
    assert len(secrets) == 2, sorted(issued)  # the provider issued both, so the scan can find them
    everything = "\n".join(outputs)
    assert len(everything) > 10_000  # pages, answers and logs were all collected
    for token in secrets:
        assert token not in everything
