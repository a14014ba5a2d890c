"""Toolhub's own version (pyproject.toml is the one source), e.g. for the MCP client's identity."""

from __future__ import annotations

import tomllib
from pathlib import Path


def _read() -> str:
    try:
        data = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
        return str(data["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "0.0.0"


VERSION = _read()
