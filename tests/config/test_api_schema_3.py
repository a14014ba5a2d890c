"""The third part of the OpenAPI fuzz (`test_api_schema.py` says how it is split): the same checks on other operations."""

from __future__ import annotations

from typing import Any

import pytest

from tests.config.schema_fuzz import api_schema, fuzz, operations_of_part, wsgi_app
from tests.waiting import scaled

pytestmark = [pytest.mark.schema_fuzz, pytest.mark.timeout(scaled(360))]
__all__ = ["api_schema", "wsgi_app"]  # the fixtures, used by name


def test_api_conforms_to_its_schema_part_3(api_schema: Any) -> None:
    fuzz(operations_of_part(api_schema, 2))
