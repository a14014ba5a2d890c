"""The tenant-scoped viewset base: detail views go through the scoped queryset; roles are declared, not mutated."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import QuerySet

from core.api import TenantViewSet
from core.roles import Role
from tools_app.api.views import ToolViewSet
from tools_app.models import ToolStatus, ToolType

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["get_queryset", "initial", "get_permissions", "check_permissions", "get_object"])
def test_a_viewset_cannot_bypass_the_base(name: str) -> None:
    with pytest.raises(TypeError):
        type("Sneaky", (TenantViewSet,), {name: lambda self, *a, **k: None})


def test_action_roles_are_read_only() -> None:
    class Declared(TenantViewSet):
        action_roles = {"invoke": Role.MEMBER}

        def scoped_queryset(self, *, tenant: Any, user: Any) -> QuerySet[Any]:
            raise NotImplementedError

    with pytest.raises(TypeError):
        Declared.action_roles["invoke"] = Role.VIEWER
    assert ToolViewSet.action_roles["invoke"] == Role.MEMBER


def agent(api: Any) -> int:
    resp = api.post("/api/v1/agents/", {"name": "helper"}, format="json")
    assert resp.status_code == 201, resp.content
    return int(resp.json()["id"])


def test_detail_through_get_object_is_scoped(api: Any, other_api: Any) -> None:
    """AgentViewSet.retrieve uses the base's get_object: another tenant's agent is exactly a missing one."""
    foreign_id = agent(other_api)
    foreign = api.get(f"/api/v1/agents/{foreign_id}/")
    missing = api.get("/api/v1/agents/999999/")
    assert foreign.status_code == missing.status_code == 404 and foreign.json() == missing.json()
    huge = api.get("/api/v1/agents/99999999999999999999999999/")
    assert huge.status_code == 404 and huge.json() == missing.json()
    # Ids are digits only: a word is no route at all (the JSON 404 envelope), never a lookup.
    word = api.get("/api/v1/agents/abc/")
    assert word.status_code == 404 and word.json()["error"]["code"] == "not_found"
    assert other_api.get(f"/api/v1/agents/{foreign_id}/").status_code == 200


def test_declared_roles_apply_per_action(tenant: Any, api: Any, member_client: Any, tool_factory: Any) -> None:
    tool = tool_factory(tenant=tenant, type=ToolType.BUILTIN, status=ToolStatus.ENABLED)
    member = member_client(tenant, Role.MEMBER)
    viewer = member_client(tenant, Role.VIEWER)
    body = {"function": "nope", "arguments": {}}
    assert member.post(f"/api/v1/tools/{tool.pk}/invoke/", body, format="json").status_code == 200  # declared MEMBER
    assert viewer.post(f"/api/v1/tools/{tool.pk}/invoke/", body, format="json").status_code == 403
    assert member.patch(f"/api/v1/tools/{tool.pk}/", {"description": "x"}, format="json").status_code == 403
    agent_id = agent(api)
    chat = member.post(f"/api/v1/agents/{agent_id}/chat/", {"message": "hi"}, format="json")
    assert chat.status_code != 403  # chat is declared MEMBER (it fails later: the agent has no model)
    assert member.patch(f"/api/v1/agents/{agent_id}/", {"description": "x"}, format="json").status_code == 403
