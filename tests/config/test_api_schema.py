"""The OpenAPI schema is the contract: schemathesis fuzzes every operation against it: no 5xx, no response that breaks it.

This module fuzzes the first of three parts of the operations (label order, every third one from the first),
`test_api_schema_2.py` and `test_api_schema_3.py` the others; the machinery and the checks are in
`tests/config/schema_fuzz.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.config.schema_fuzz import api_schema, fuzz, operations_of_part, wsgi_app
from tests.waiting import scaled

# ~500 requests: under a loaded CI, and taken first by a parallel run (slowest modules first), they outlast the
# suite's 120 s per-test timeout (which then interrupts Hypothesis mid-example and reads as a flaky operation).
pytestmark = [pytest.mark.schema_fuzz, pytest.mark.timeout(scaled(360))]
__all__ = ["api_schema", "wsgi_app"]  # the fixtures, used by name


def test_api_conforms_to_its_schema(api_schema: Any) -> None:
    fuzz(operations_of_part(api_schema, 0))
