"""Helpers of the identity tests: a SCIM client on Toolhub's WSGI app, providers made through the API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections

BASE = "http://testserver/scim/v2"


def scim_token(api: Any) -> str:
    resp = api.post("/api/v1/scim-tokens/", {}, format="json")
    assert resp.status_code == 201, resp.content
    return str(resp.json()["token"])


@contextmanager
def in_test_transaction() -> Iterator[None]:
    """Requests through the WSGI app keep the test's database connection (as Django's test Client does): the
    handler would close it at the end of each request otherwise."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def wsgi_app() -> Callable[[Any, Any], list[bytes]]:
    """Django's WSGI handler, each request inside `in_test_transaction` (Django's test Client reconnects the
    closing signal after each of its own requests, so it is taken off per request here). Made once per client:
    get_wsgi_application() runs django.setup() again, which configures logging anew (dictConfig): made per request,
    scim2-tester's ~530 requests paid that ~530 times (~1.2 s of CPU)."""
    handler = get_wsgi_application()

    def app(environ: Any, start_response: Any) -> list[bytes]:
        with in_test_transaction():
            response = handler(environ, start_response)
            try:
                return [b"".join(response)]
            finally:
                response.close()

    return app


def scim_client(token: str, *, discovered: bool = False) -> Any:
    """scim2-client speaking to /scim/v2/ through Django's whole WSGI stack (middleware, urls, views)."""
    # Imported here, not at the top (and scim2-models, in the SCIM tests' functions): ~1 s of CPU (their pydantic
    # models), which every xdist worker would pay while it collects the suite, though one or two run SCIM tests.
    from scim2_client.engines.wsgi import WSGISCIMClient
    from scim2_models import Group, ScimProvider, User

    provider = None if discovered else ScimProvider(models=[User, Group])
    return WSGISCIMClient(wsgi_app(), base_url=BASE, headers={"Authorization": f"Bearer {token}"},
                          provider=provider)
