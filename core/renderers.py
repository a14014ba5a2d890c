"""Response renderers beyond JSON: YAML, for exports a client asks for with `Accept: application/yaml`."""

from __future__ import annotations

from typing import Any

import yaml
from rest_framework.renderers import BaseRenderer


class YAMLRenderer(BaseRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")


class TextYAMLRenderer(YAMLRenderer):
    media_type = "text/yaml"
