"""scim2-tester's checks against /scim/v2/: nothing that the ServiceProviderConfig declares fails."""

from __future__ import annotations

from typing import Any

from tests.identity_app.support import scim_client, scim_token


def test_scim2_tester_finds_no_failures(api: Any, settings: Any) -> None:
    from scim2_tester import Status, check_server  # imports scim2-client: ~1 s of CPU no other module needs

    failed_statuses = {Status.ERROR, Status.CRITICAL}
    settings.TOOLHUB_PUBLIC_URL = "http://testserver"
    client = scim_client(scim_token(api), discovered=True)
    client.discover()
    results = check_server(client)
    failed = [(r.title, r.resource_type, r.reason) for r in results if r.status in failed_statuses]
    assert results and not failed, "\n".join(map(str, failed))
    # The checks ran: creation, reads, replacement and deletion of both resource types.
    passed = {r.title for r in results if r.status == Status.SUCCESS}
    assert len(passed) > 20
