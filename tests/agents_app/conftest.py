"""Fixtures for the agents API tests: fake models and the MCP pool's cleanup."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.agents_app.support import MODEL_KEY
from tests.fixtures.fake_llm import FakeLLM, llm_servers
from tools_app.wiring import pool as wiring_pool


@pytest.fixture(autouse=True)
def _chat_settings(settings: Any) -> None:
    settings.TOOLHUB_MODEL_TIMEOUT_S = 5
    settings.TOOLHUB_DEMO_MODEL_URL = ""


@pytest.fixture
def start_llm(llm_hub: Any) -> Iterator[Callable[..., FakeLLM]]:
    """start_llm(script, **kw) -> a running FakeLLM expecting MODEL_KEY, on this process's one fake-LLM server
    (`llm_hub`) under a path of its own; all are stopped at teardown."""
    with llm_servers(MODEL_KEY, llm_hub) as start:
        yield start


@pytest.fixture
def close_pool() -> Iterator[None]:
    yield
    wiring_pool.pool().close_all()
