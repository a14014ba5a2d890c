"""core.urls.origin: the one origin rule the secret rules and the outbound guard's redirects share."""

from __future__ import annotations

from core import outbound, secrets
from core.urls import origin, same_origin


def test_origin_normalises_scheme_host_and_default_ports() -> None:
    assert origin("HTTPS://Example.COM/a?b") == ("https", "example.com", 443)
    assert same_origin("http://h/x", "http://h:80/y")
    assert same_origin("https://h", "https://H:443/")
    assert not same_origin("https://h", "http://h")
    assert not same_origin("https://h", "https://h:8443")
    assert not same_origin("https://h", "https://h.evil")


def test_a_malformed_url_is_the_same_origin_as_no_real_url() -> None:
    assert not same_origin("https://h:99999/", "https://h/")
    assert origin("https://h:99999/") == ("", "https://h:99999/", None)


def test_the_secret_rules_and_the_outbound_guard_use_the_same_rule() -> None:
    assert secrets.origin is origin and outbound.origin is origin
