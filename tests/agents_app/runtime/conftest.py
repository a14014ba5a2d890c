"""Fixtures for the Django-free agent runtime tests: a real fake-LLM server per test and a small toolset."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from agents_app.runtime.toolset import Toolset
from tests.agents_app.runtime.support import API_KEY, demo_toolset
from tests.fixtures.fake_llm import FakeLLM, ScriptItem


@pytest.fixture
def toolset() -> Toolset:
    return demo_toolset()


@pytest.fixture
def fake_llm() -> Iterator[Callable[..., FakeLLM]]:
    """Start a FakeLLM per call (scripted turns); all are stopped at teardown."""
    servers: list[FakeLLM] = []

    def start(script: Sequence[ScriptItem], **kwargs: Any) -> FakeLLM:
        kwargs.setdefault("api_key", API_KEY)
        server = FakeLLM(script, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()

