"""MCP content blocks as plain JSON dicts, and the text a model (or a person) can read from them."""

from __future__ import annotations

import base64
import binascii
from typing import Any

# A text resource longer than this is cut in the joined text (the content list keeps it whole).
MAX_INLINE_RESOURCE_CHARS = 20_000


def content_dicts(items: list[Any]) -> list[dict[str, Any]]:
    """Each MCP content block as the wire's JSON dict (type, mimeType, data/uri/text, annotations)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict):
            out.append(dict(item))
        elif hasattr(item, "model_dump"):
            out.append(item.model_dump(mode="json", by_alias=True, exclude_none=True))
    return out


def _size_of(data: Any) -> int | None:
    if not isinstance(data, str):
        return None
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return None


def _size_note(data: Any) -> str:
    size = _size_of(data)
    return f", {size} bytes" if size is not None else ""


def block_text(block: dict[str, Any]) -> str:
    """What a reader gets from one block: its text, a resource's text inline, a placeholder otherwise."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType') or 'unknown type'}{_size_note(block.get('data'))}]"
    if kind == "resource":
        resource = block.get("resource") or {}
        uri = resource.get("uri") or ""
        mime = resource.get("mimeType")
        if "text" in resource:
            text = str(resource.get("text") or "")
            if len(text) > MAX_INLINE_RESOURCE_CHARS:
                text = text[:MAX_INLINE_RESOURCE_CHARS] + f"\n[resource text cut at {MAX_INLINE_RESOURCE_CHARS} characters]"
            return f"[resource {uri}{' (' + mime + ')' if mime else ''}]\n{text}"
        return f"[resource {uri}: {mime or 'binary'}{_size_note(resource.get('blob'))}]"
    if kind == "resource_link":
        name = block.get("title") or block.get("name") or ""
        parts = [f"[resource link: {name} <{block.get('uri') or ''}>"]
        if block.get("mimeType"):
            parts.append(f" ({block['mimeType']})")
        if block.get("description"):
            parts.append(f" - {block['description']}")
        return "".join(parts) + "]"
    return f"[{kind or 'content'}]"


def joined_text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(block_text(b) for b in blocks)


def excerpt(blocks: list[dict[str, Any]], cap: int = 200) -> list[dict[str, Any]]:
    """The content list with long strings (image/audio data, blobs, resource text) cut to `cap`, sizes kept."""

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > cap:
            return value[:cap] + f"...[{len(value)} chars]"
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v) for v in value]
        return value

    return [cut(b) for b in blocks]
