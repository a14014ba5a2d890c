"""The production web worker (deploy/gunicorn.conf.py -> config/workers.py) serves on uvloop and httptools."""

from __future__ import annotations

import asyncio
import runpy
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Pinned in requirements.lock; a venv made before they were added skips rather than fails.
uvloop = pytest.importorskip("uvloop")
pytest.importorskip("httptools")


def test_gunicorn_conf_names_the_uvloop_httptools_worker() -> None:
    conf = runpy.run_path(str(REPO / "deploy" / "gunicorn.conf.py"))
    assert conf["worker_class"] == "config.workers.UvicornWorker"


def test_the_worker_config_loads_uvloop_and_httptools() -> None:
    from uvicorn.config import Config
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from config.workers import UvicornWorker

    async def app(scope: object, receive: object, send: object) -> None:  # pragma: no cover - never served
        raise AssertionError

    config = Config(app=app, log_config=None, **UvicornWorker.CONFIG_KWARGS)
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
        assert not isinstance(loop, asyncio.SelectorEventLoop)
    finally:
        loop.close()
