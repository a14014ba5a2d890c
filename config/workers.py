"""The web processes' gunicorn worker (deploy/gunicorn.conf.py): uvicorn on uvloop's event loop and httptools' parser.

uvicorn_worker's own class asks for `loop="auto"` and `http="auto"`, which fall back to asyncio's loop and h11 when
uvloop or httptools is missing: a slower worker without a word. Production names both, so a deployment without them
(requirements.lock pins them) fails at start instead. Tests and `make run` keep uvicorn's choice ("auto").
"""

from __future__ import annotations

from typing import Any

from uvicorn_worker import UvicornWorker as _UvicornWorker


class UvicornWorker(_UvicornWorker):  # type: ignore[misc]  # uvicorn-worker ships no type hints (Any)
    CONFIG_KWARGS: dict[str, Any] = {"loop": "uvloop", "http": "httptools"}
