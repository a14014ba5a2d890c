"""Response renderers beyond JSON: YAML, for exports a client asks for with `Accept: application/yaml`; JSON with a
page's rows encoded once while the page stays cached."""

from __future__ import annotations

import json
import threading
from typing import Any

import yaml
from rest_framework.compat import LONG_SEPARATORS, SHORT_SEPARATORS
from rest_framework.renderers import BaseRenderer, JSONRenderer


class EncodedRows(list[Any]):
    """A page's rows (a list, as any other) with the JSON text DRF's JSONRenderer gives them, shared by every
    request that serves the same cached page: `rows` is the cached list, `cache` a dict made with it."""

    def __init__(self, rows: list[Any], cache: dict[Any, str]) -> None:
        super().__init__(dict(row) for row in rows)  # each request its own copies, as before
        self._rows = rows
        self._cache = cache

    def encoded(self, renderer: JSONRenderer, separators: tuple[str, str]) -> str:
        key = (renderer.encoder_class, renderer.ensure_ascii, renderer.strict, separators)
        text = self._cache.get(key)
        if text is None:
            text = json.dumps(self._rows, cls=renderer.encoder_class, ensure_ascii=renderer.ensure_ascii,
                              allow_nan=not renderer.strict, separators=separators)
            with _LOCK:
                text = self._cache.setdefault(key, text)
        return text


_LOCK = threading.Lock()


class PageJSONRenderer(JSONRenderer):
    """DRF's JSONRenderer, byte for byte; a paginated body whose `results` are EncodedRows (the last key, as
    PageNumberPagination puts it) takes their JSON text from the page's cache instead of encoding the rows again.
    An indented rendering (the browsable API, `; indent=`) renders everything, as DRF does."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        rows = data.get("results") if type(data) is dict else None
        if type(rows) is not EncodedRows or self.get_indent(accepted_media_type or "", renderer_context or {}) is not None:
            return super().render(data, accepted_media_type, renderer_context)
        separators = SHORT_SEPARATORS if self.compact else LONG_SEPARATORS
        empty = "[]}"
        head = json.dumps({**data, "results": []}, cls=self.encoder_class, ensure_ascii=self.ensure_ascii,
                          allow_nan=not self.strict, separators=separators)
        if not head.endswith(empty) or list(data)[-1] != "results":
            return super().render(data, accepted_media_type, renderer_context)
        ret = head[: -len(empty)] + rows.encoded(self, separators) + "}"
        return ret.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


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
