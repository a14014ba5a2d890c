"""The `public` network launcher's pure parts: which routes it closes, and which user namespace slirp4netns joins."""

from __future__ import annotations

import os

import pytest

from tools_app.runtime import netjail


def test_an_address_held_twice_gets_one_route(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two interfaces with one address (or an extra block naming a host address) once made `ip route add` fail with
    # "File exists" and the server never started.
    monkeypatch.setattr(netjail, "host_addresses", lambda: ["198.51.100.17", "198.51.100.17", "127.0.0.1"])
    routes = netjail.blocked_routes(["198.51.100.17/32", "203.0.113.9"])
    assert len(routes) == len(set(routes))
    assert routes.count("198.51.100.17/32") == 1
    assert "203.0.113.9/32" in routes
    assert "127.0.0.1/32" not in routes  # inside 127.0.0.0/8, already closed


def test_no_user_namespace_to_join_for_a_network_namespace_of_our_own() -> None:
    # This process's network namespace is owned by its own user namespace: nothing is passed to slirp4netns.
    assert netjail._owner_userns(os.getpid()) is None
