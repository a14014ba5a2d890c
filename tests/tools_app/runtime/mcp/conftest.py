"""Django-free fixtures for the MCP runtime tests: a loopback-allowing pool and leak checks by env marker."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from core.outbound import OutboundPolicy
from tests.fixtures.mcp_servers import MINI, PYTHON
from tests.waiting import wait_until
from tools_app.configs import server_spec as spec_from_config
from tools_app.runtime.mcp import ServerSpec, SessionPool

LOOPBACK = OutboundPolicy.build("127.0.0.0/8,::1")
MARKER_ENV = "TOOLHUB_TEST_MARKER"


def marked_pids(marker: str) -> list[int]:
    """Every live (non-zombie) process whose environment carries `marker`: children, grandchildren, orphans."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != "Z":
            found.append(int(entry))
    return found


def wait_no_marked(marker: str) -> list[int]:
    """The marked processes still running once none is left, or when the wait's (generous) bound passed."""
    wait_until(lambda: not marked_pids(marker))
    return marked_pids(marker)


class Specs:
    """Builds specs whose children carry a per-test marker env var."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def local(
        self,
        script: Path | None = MINI,
        *,
        tool_id: int = 1,
        version: int = 1,
        tenant: str = "acme",
        env: dict[str, str] | None = None,
        **config: Any,
    ) -> ServerSpec:
        cfg: dict[str, Any] = {
            "command": PYTHON,
            "args": [str(script)] if script else [],
            "env": {MARKER_ENV: self.marker, **(env or {})},
            "startup_timeout_s": 15,
            "call_timeout_s": 10,
        }
        cfg.update(config)
        return spec_from_config(
            tool_id=tool_id, config_version=version, tenant_key=tenant, tool_type="LOCAL", config=cfg
        )

    @staticmethod
    def remote(url: str, transport: str = "streamable_http", *, tool_id: int = 100, **config: Any) -> ServerSpec:
        cfg: dict[str, Any] = {"url": url, "transport": transport, "timeout_s": 5}
        cfg.update(config)
        return spec_from_config(tool_id=tool_id, config_version=1, tenant_key="acme", tool_type="REMOTE", config=cfg)


@pytest.fixture
def marker() -> str:
    return uuid.uuid4().hex


@pytest.fixture
def specs(marker: str) -> Specs:
    return Specs(marker)


@contextmanager
def pool_maker(marker: str) -> Iterator[Any]:
    """`make(**kwargs)` -> a loopback-allowing SessionPool; at the end every pool made is shut down and no process
    carrying `marker` may outlive them."""
    pools: list[SessionPool] = []

    def make(**kwargs: Any) -> SessionPool:
        kwargs.setdefault("policy", LOOPBACK)
        pool = SessionPool(**kwargs)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.shutdown()
    assert wait_no_marked(marker) == [], "a child process outlived its pool"


@pytest.fixture
def make_pool(marker: str) -> Iterator[Any]:
    with pool_maker(marker) as make:
        yield make


@pytest.fixture
def pool(make_pool: Any) -> SessionPool:
    return make_pool(idle_ttl_s=300)
