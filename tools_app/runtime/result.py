"""The one result shape every tool runtime returns (MCP, built-in, HTTP)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from core.codes import REASON_FAMILY, Reason, ResultCode
from core.secrets import Scrubber
from tools_app.runtime.content import joined_text

# The invoke contract's error codes (the families of core.codes.ResultCode), shared by every runtime.
INVALID_PARAMS = ResultCode.INVALID_PARAMS
NOT_FOUND = ResultCode.NOT_FOUND
DISABLED = ResultCode.DISABLED
APPROVAL_REQUIRED = ResultCode.APPROVAL_REQUIRED
TIMEOUT = ResultCode.TIMEOUT
BUSINESS_ERROR = ResultCode.BUSINESS_ERROR
EXECUTION_ERROR = ResultCode.EXECUTION_ERROR
REFUSED = ResultCode.REFUSED
DRY_RUN_UNSUPPORTED = ResultCode.DRY_RUN_UNSUPPORTED
AUTHORIZATION_REQUIRED = ResultCode.AUTHORIZATION_REQUIRED
CREDENTIALS_REQUIRED = ResultCode.CREDENTIALS_REQUIRED
QUOTA_EXCEEDED = ResultCode.QUOTA_EXCEEDED
DENIED = ResultCode.DENIED

ERROR_CODES = tuple(ResultCode)

# ToolResult.meta keys of an MCP server's answer (tools_app.runtime.mcp.discovery): the result-level `_meta` as sent,
# and that the server itself answered isError (its result is passed through whole, unlike Toolhub's own refusals).
# Here, not beside the SDK's types there, so the result screen reads them without importing the SDK (issue 35).
RESULT_META = "result_meta"
UPSTREAM_ERROR = "upstream_error"


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
    # The distinct cause of a refusal (core.codes.Reason) beside its family `error_code`; None otherwise.
    error_reason: str | None = None
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
        return cls(success=False, error_code=ResultCode(code), error=message, meta=dict(meta))

    @classmethod
    def refused(cls, reason: Reason, message: str, **meta: Any) -> ToolResult:
        """A call refused for a distinct cause: `error_code` is its family (REASON_FAMILY), `error_reason` it."""
        return cls(success=False, error_code=REASON_FAMILY[reason], error_reason=reason, error=message,
                   meta=dict(meta))

    def scrubbed(self, scrubber: Scrubber) -> ToolResult:
        """This result with every secret masked in text, data, content, error and meta (in place; returns self)."""
        if scrubber:
            joined = bool(self.content) and self.text == joined_text(self.content)
            self.error = scrubber.text(self.error) if self.error else self.error
            # Data and content as one value: a secret split between them, or across content items, is caught.
            self.data, self.content = scrubber.value([self.data, self.content])
            self.meta = scrubber.value(self.meta)
            # The text joined from the content shows what the content now shows (a split secret's halves too).
            self.text = joined_text(self.content) if joined else scrubber.text(self.text)
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
