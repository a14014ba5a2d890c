"""Drift: a change of a function's MCP annotations is held for approval like a schema change."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import ToolFactory
from tools_app.models import FunctionState, ToolFunction
from tools_app.services.discovery import Offered, store_functions

pytestmark = pytest.mark.django_db

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def test_annotation_change_is_drift(tenant: Any) -> None:
    tool = ToolFactory(tenant=tenant, type="LOCAL")
    store_functions(tool=tool, offered=[Offered("move", "Move a file", SCHEMA, annotations={"readOnlyHint": True})])
    assert ToolFunction.objects.get(tool=tool, name="move").state == FunctionState.ACTIVE
    changes = store_functions(tool=tool, offered=[
        Offered("move", "Move a file", SCHEMA, annotations={"readOnlyHint": False, "destructiveHint": True})])
    assert changes["changed"] == ["move"]
    fn = ToolFunction.objects.get(tool=tool, name="move")
    assert fn.state == FunctionState.CHANGED and fn.safety == "DESTRUCTIVE"
