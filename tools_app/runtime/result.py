"""The one result shape every tool runtime returns (MCP, built-in, HTTP)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from core.secrets import Scrubber

# Error codes of DESIGN §4, shared by every runtime.
INVALID_PARAMS = "INVALID_PARAMS"
NOT_FOUND = "NOT_FOUND"
DISABLED = "DISABLED"
APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
TIMEOUT = "TIMEOUT"
BUSINESS_ERROR = "BUSINESS_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
# A tool's own refusal (plugin hooks), and a trial run asked of a tool whose effects a rollback cannot undo.
REFUSED = "REFUSED"
DRY_RUN_UNSUPPORTED = "DRY_RUN_UNSUPPORTED"
# An OAuth tool without a usable connection for this caller (DESIGN §4, Connections).
AUTHORIZATION_REQUIRED = "AUTHORIZATION_REQUIRED"

ERROR_CODES = (
    INVALID_PARAMS,
    NOT_FOUND,
    DISABLED,
    APPROVAL_REQUIRED,
    TIMEOUT,
    BUSINESS_ERROR,
    EXECUTION_ERROR,
    REFUSED,
    DRY_RUN_UNSUPPORTED,
    AUTHORIZATION_REQUIRED,
)


@dataclass
class ToolResult:
    """Outcome of one call: structured `data`, joined `text`, the whole MCP `content` list, or a typed error.

    `content` holds plain JSON dicts (the MCP wire shape: type, mimeType, data/uri/text, annotations)
    so the secret scrubber and the gateway can treat it as data.

    `shown` marks a result drawn for the reader (a table, a chart): chat and the audit keep it whole
    instead of cutting it to the usual excerpt, so the page can draw exactly what the model read.
    """

    success: bool
    data: Any = None
    text: str = ""
    error_code: str | None = None
    error: str | None = None
    cost_ms: int = 0
    content: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    shown: bool = False

    @classmethod
    def ok(cls, *, data: Any = None, text: str = "", content: list[dict[str, Any]] | None = None,
           shown: bool = False, **meta: Any) -> ToolResult:
        return cls(success=True, data=data, text=text, content=list(content or []), meta=dict(meta), shown=shown)

    @classmethod
    def fail(cls, code: str, message: str, **meta: Any) -> ToolResult:
        assert code in ERROR_CODES, code
        return cls(success=False, error_code=code, error=message, meta=dict(meta))

    def scrubbed(self, scrubber: Scrubber) -> ToolResult:
        """This result with every secret masked in text, data, content, error and meta (in place; returns self)."""
        if scrubber:
            self.text = scrubber.text(self.text)
            self.error = scrubber.text(self.error) if self.error else self.error
            self.data, self.meta = scrubber.value(self.data), scrubber.value(self.meta)
            self.content = scrubber.value(self.content)
        return self

    def as_dict(self) -> dict[str, Any]:
        # Shallow on purpose: a deep copy of a 100-record `data` cost more than rendering it (bench/records.py).
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "meta"}
        if self.meta.get("result_meta"):  # the MCP result's own `_meta` (tools_app.runtime.mcp.discovery)
            out["meta"] = self.meta["result_meta"]
        out["content"] = list(self.content)
        if not out["content"] and self.text:
            # Built-in and HTTP tools answer text only: the same list shape for every caller.
            out["content"] = [{"type": "text", "text": self.text}]
        return out
