"""Request parsers: JSON and YAML documents, refused with a 400 before any view runs when too deep or aliased.

Every value a request carries is checked here once, so no later code (validation, storage, masking,
export, the admin page) meets a document it cannot walk: nesting is capped well below Python's
recursion limit and YAML aliases, which can expand a few hundred bytes into a hundred megabytes, are
refused outright.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.conf import settings
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.parsers import BaseParser
from rest_framework.parsers import FormParser as DRFFormParser
from rest_framework.parsers import JSONParser as DRFJSONParser

# Past this a body is refused whatever it is; documents with their own rules (tool configs) cap lower.
# Well below Python's recursion limit (near 1000): on 3.11 the JSON decoder itself gives up a little under it, on
# 3.13 it does not, so a bound near 1000 would refuse the same body differently by version.
DEFAULT_MAX_DEPTH = 512


def max_depth() -> int:
    return int(getattr(settings, "TOOLHUB_MAX_JSON_DEPTH", DEFAULT_MAX_DEPTH))


def document_depth(value: Any, limit: int) -> int:
    """The nesting depth of `value` (a scalar is 0), counting no further than `limit` + 1. Iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def check_depth(value: Any, *, limit: int | None = None) -> Any:
    limit = max_depth() if limit is None else limit
    if document_depth(value, limit) > limit:
        raise ParseError(f"the document nests deeper than {limit} levels (rule: at most {limit} levels of objects/arrays)")
    return value


class JSONParser(DRFJSONParser):
    """DRF's JSON parser plus the depth rule (and RecursionError from a pathological body is a 400)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"the document nests deeper than {max_depth()} levels") from None
        return check_depth(data)


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without anchors and aliases: a document means exactly what it spells out."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # types-PyYAML leaves it unannotated
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not accepted", event.start_mark
            )
        event = self.peek_event()  # type: ignore[no-untyped-call]  # types-PyYAML leaves it unannotated
        if getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None, None, "YAML anchors (&name) are not accepted", event.start_mark
            )
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """Parse one YAML document safely: no tags beyond SafeLoader's, no anchors or aliases, bounded depth."""
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)
    except RecursionError:
        raise ParseError(f"the document nests deeper than {max_depth()} levels") from None
    except yaml.YAMLError as exc:
        raise ParseError(f"YAML parse error: {str(exc)[:300]}") from None
    return check_depth(data)


class YAMLParser(BaseParser):
    media_type = "application/yaml"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            text = stream.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"YAML parse error: {exc}") from None
        return load_yaml(text)


class TextYAMLParser(YAMLParser):
    media_type = "text/yaml"


class FormParser(DRFFormParser):
    """Form bodies, except one that is really JSON sent without its content type (`curl -d '{...}'`).

    Parsed as a form, such a body becomes one field named after the whole document, and the serializer
    would answer "unknown field '{...}'". Saying what happened is more useful, and never echoes the body.
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        keys = list(data.keys())
        if keys and keys[0].lstrip()[:1] in ("{", "["):
            raise UnsupportedMediaType(
                media_type or "application/x-www-form-urlencoded",
                detail="the body looks like JSON but was sent as a form (Content-Type: "
                       f"{media_type or 'application/x-www-form-urlencoded'}); send it with "
                       "Content-Type: application/json (curl: -H 'Content-Type: application/json')",
            )
        return data
