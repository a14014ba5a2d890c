"""Fixtures for the agents API tests: fake models and the MCP pool's cleanup."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests.agents_app.support import MODEL_KEY
from tests.fixtures.fake_llm import FakeLLM, ScriptItem
from tools_app import adapters


@pytest.fixture(autouse=True)
def _chat_settings(settings: Any) -> None:
    settings.TOOLHUB_MODEL_TIMEOUT_S = 5
    settings.TOOLHUB_DEMO_MODEL_URL = ""


@pytest.fixture
def start_llm() -> Iterator[Callable[..., FakeLLM]]:
    """start_llm(script, **kw) -> a running FakeLLM expecting MODEL_KEY; all are stopped at teardown."""
    servers: list[FakeLLM] = []

    def start(script: Sequence[ScriptItem] | None, **kwargs: Any) -> FakeLLM:
        kwargs.setdefault("api_key", MODEL_KEY)
        server = FakeLLM(script, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def close_pool() -> Iterator[None]:
    yield
    adapters.pool().close_all()
