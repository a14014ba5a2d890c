"""The tests' own HTTP clients, to the servers they start on 127.0.0.1: httpx2's, with the process's one TLS context.

Without `verify=<an SSLContext>` httpx2 builds a new context, loading the CA bundle (~20-50 ms of CPU), for every
`Client`, `AsyncClient` and top-level `httpx2.get/post/request`: ~4 % of the suite's CPU. The shared context is the
product's (core.outbound.ssl_context): the default CA bundle, hostnames checked, as httpx2's default.
"""

from __future__ import annotations

from typing import Any

import httpx2

from core.outbound import ssl_context


def client(**kw: Any) -> httpx2.Client:
    return httpx2.Client(verify=ssl_context(), **kw)


def async_client(**kw: Any) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(verify=ssl_context(), **kw)


def request(method: str, url: str, **kw: Any) -> httpx2.Response:
    """`httpx2.request` (a client of its own for one request, closed after it) with the shared context."""
    return httpx2.request(method, url, verify=ssl_context(), **kw)


def get(url: str, **kw: Any) -> httpx2.Response:
    return request("GET", url, **kw)


def options(url: str, **kw: Any) -> httpx2.Response:
    return request("OPTIONS", url, **kw)


def post(url: str, **kw: Any) -> httpx2.Response:
    return request("POST", url, **kw)


def put(url: str, **kw: Any) -> httpx2.Response:
    return request("PUT", url, **kw)


def delete(url: str, **kw: Any) -> httpx2.Response:
    return request("DELETE", url, **kw)
