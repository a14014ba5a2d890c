"""Response renderers beyond JSON: YAML, for exports a client asks for with `Accept: application/yaml`."""

from __future__ import annotations

import json
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
        # Through JSON first: DRF's ErrorDetail and other str/dict subclasses are plain values there,
        # and safe_dump represents only exact built-in types.
        plain = json.loads(json.dumps(data, default=str))
        return yaml.safe_dump(plain, sort_keys=False, allow_unicode=True).encode("utf-8")


class TextYAMLRenderer(YAMLRenderer):
    media_type = "text/yaml"
