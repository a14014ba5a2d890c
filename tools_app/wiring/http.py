"""The outbound guard from settings: its policy and the pooled HTTP client that goes through it."""

from __future__ import annotations

import threading
from typing import Any

import httpx2
from django.conf import settings

from core.outbound import GuardedTransport, OutboundPolicy
from core.process_state import PerProcess


def outbound_policy(**overrides: Any) -> OutboundPolicy:
    return OutboundPolicy.build(
        settings.TOOLHUB_OUTBOUND_ALLOW,
        max_bytes=overrides.get("max_bytes", settings.TOOLHUB_OUTBOUND_MAX_BYTES),
        timeout_s=overrides.get("timeout_s", settings.TOOLHUB_OUTBOUND_TIMEOUT_S),
    )


# Per process (core.process_state) and allowlist: reused, so its connections stay warm.
_http_clients: PerProcess[dict[str, httpx2.Client]] = PerProcess(dict)
_clients_lock = threading.Lock()


def guarded_http_client() -> httpx2.Client:
    """A pooled HTTP client whose every request (model endpoints) goes through the outbound guard, pinned.

    One per process and allowlist, reused so its connections stay warm (the TLS context is core.outbound's one).
    """
    key = str(settings.TOOLHUB_OUTBOUND_ALLOW)
    clients = _http_clients.get()
    with _clients_lock:
        client = clients.get(key)
        if client is None:
            client = httpx2.Client(
                transport=GuardedTransport(outbound_policy(),
                                           limits=httpx2.Limits(max_connections=200, max_keepalive_connections=40)),
                follow_redirects=False,
                trust_env=False,
            )
            clients[key] = client
        return client
