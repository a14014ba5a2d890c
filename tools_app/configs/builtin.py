"""BUILTIN tools: configured by the registry, not by the user."""

from __future__ import annotations

from typing import ClassVar

from tools_app.configs.base import ConfigSpec


class BuiltinConfig(ConfigSpec):
    tool_type: ClassVar[str] = "BUILTIN"
