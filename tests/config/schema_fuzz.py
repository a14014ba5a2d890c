"""Schemathesis over the OpenAPI schema, shared by the fuzz modules (`test_api_schema*.py`): each module fuzzes one
of `PARTS` disjoint parts of the operations (`operations_of_part`), so none outlasts the suite's per-module budget
(60 s on a loaded 2-core machine: a half took ~75 s there) and a parallel run spreads them.

Checks: `not_a_server_error` (no 500 for any generated input) and `response_schema_conformance` (every
documented response matches its schema). Bounded: a few examples per operation, no shrinking.

Where a module's CPU goes (profiled 2026-12-07, the first half: 36 operations, ~930 drawn cases, ~37 s): ~14 s
drawing the cases (Hypothesis and schemathesis's strategies, ~15 ms a case), ~8 s Toolhub answering them (mostly
ORM and the role checks; ~88 % of them 4xx), ~2 s the WSGI transport (werkzeug, schemathesis's request copy for its
report), ~0.4 s the two checks (response validators are built once per response schema, not per case), ~3 s
loading the schema (drf-spectacular) and ~1 s schemathesis's constants from the app's source; the rest is pytest
and the test database. Strategies are built once per operation (`as_strategy`). Both schemathesis (constants from
the app) and Hypothesis (constants from every local module imported so far) feed source literals into the draws,
so importing Toolhub modules earlier than the requests do changes the cases drawn, not only their cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings

from tenants_app.models import Role
from tenants_app.services import token_for_user
from tests.factories import MembershipFactory, TenantFactory, ToolFactory, UserFactory

MAX_EXAMPLES = 25
PARTS = 3  # test_api_schema.py, test_api_schema_2.py, test_api_schema_3.py: one part each

# Operations that reach out on purpose (chat to a model, tests and refreshes of remote servers, MCP
# discovery): with generated URLs they would wait on the network, not exercise input handling.
NETWORK_BOUND = r"/(chat|test|refresh|resume)/$|/batch-load/$|/entries/\{id\}/load/$|/market-update/$"


@pytest.fixture
def wsgi_app(db: Any) -> Iterator[Any]:
    """The real WSGI app, minus the per-request connection close (as Django's test client does)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(wsgi_app: Any) -> Any:
    tenant = TenantFactory(slug="acme")
    user = UserFactory(username="fuzz-admin")
    MembershipFactory(tenant=tenant, user=user, role=Role.OWNER)
    ToolFactory(tenant=tenant, name="remote-one")
    token = token_for_user(user=user)
    headers = {"Authorization": f"Token {token}", "X-Tenant": tenant.slug}
    # schemathesis is imported here and in fuzz(), not at the top (nor as a pytest plugin: `make test` passes
    # `-p no:schemathesis`): every xdist worker collects this module, one or two fuzz.
    import schemathesis

    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", wsgi_app, headers=headers)
    return schema.exclude(path_regex=NETWORK_BOUND)


def operations_of_part(api_schema: Any, part: int) -> list[Any]:
    """Every `PARTS`-th operation in label order, from `part`: the parts are disjoint and together are every one."""
    operations = sorted((result.ok() for result in api_schema.get_all_operations()), key=lambda op: op.label)
    assert len(operations) > 20  # the schema lists the whole API, not a stub
    return operations[part::PARTS]


def fuzz(operations: list[Any]) -> None:
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation import GenerationMode
    from schemathesis.specs.openapi.checks import response_schema_conformance

    headers = {"Authorization": f"Token {token_for_user(user=UserFactory(username='fuzz-admin'))}", "X-Tenant": "acme"}
    failures: list[str] = []
    checks = [not_a_server_error, response_schema_conformance]
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case: Any) -> None:
            response = case.call(headers=headers)
            case.validate_response(response, checks=checks)

        try:
            run()
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - collect every operation's first failure, then report them all
            # A Flaky/ExceptionGroup hides its causes in .exceptions: report them, not only the wrapper.
            causes = [repr(sub)[:600] for sub in getattr(exc, "exceptions", ())]
            failures.append(f"{operation.label}: {str(exc)[:1500]}" + "".join(f"\n  cause: {c}" for c in causes))
    assert not failures, "\n\n".join(failures)
