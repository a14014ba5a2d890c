"""Fixtures for the Django-free agent runtime tests: a real fake-LLM server per test and a small toolset."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agents_app.runtime.toolset import Toolset
from tests.agents_app.runtime.support import API_KEY, demo_toolset
from tests.fixtures.fake_llm import FakeLLM, llm_servers


@pytest.fixture
def toolset() -> Toolset:
    return demo_toolset()


@pytest.fixture
def fake_llm(llm_hub: Any) -> Iterator[Callable[..., FakeLLM]]:
    """Start a FakeLLM per call (scripted turns), on this process's one fake-LLM server (`llm_hub`) under a path of
    its own; all are stopped at teardown."""
    with llm_servers(API_KEY, llm_hub) as start:
        yield start
