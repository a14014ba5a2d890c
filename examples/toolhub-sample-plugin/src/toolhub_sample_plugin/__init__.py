"""A sample Toolhub plugin: `sample_retitle` uses every hook of the contract, `sample_word_count` none."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import Field

from tools_app.runtime.plugin import ApprovalCard, Safety, ToolArgs, ToolContext, ToolPlugin
from tools_app.runtime.result import ToolResult

MAX_RENAMES = 50


class Mode(enum.StrEnum):
    PREFIX = "prefix"
    REPLACE = "replace"


class RetitleArgs(ToolArgs):
    match: str = Field(min_length=1, max_length=100, description="Rename conversations whose title contains this")
    text: str = Field(min_length=1, max_length=100, description="The prefix to add, or the new title")
    mode: Mode = Field(default=Mode.PREFIX, description="prefix: put `text` before the title; replace: use `text`")
    limit: int = Field(default=10, ge=1, le=MAX_RENAMES, description="At most this many conversations")


class RetitleConversations(ToolPlugin):
    """Renames the calling user's own conversations; every write goes through the host's ORM."""

    name = "sample_retitle"
    description = "Rename the current user's conversations whose title contains a text (prefix or replace)."
    args_model = RetitleArgs
    safety = Safety.WRITE
    requires_approval = True
    requires_user = True
    undone_by_rollback = True  # it writes only Toolhub's own database: a trial run can roll it back

    def _matching(self, args: RetitleArgs, ctx: ToolContext) -> Any:
        from agents_app.models import Conversation  # the host's models, imported when a call runs

        return (Conversation.objects.filter(tenant_id=ctx.tenant_id, user_id=ctx.user_id,
                                            title__icontains=args.match).order_by("id"))

    def execute(self, args: RetitleArgs, ctx: ToolContext) -> ToolResult:
        rows = []
        for conversation in self._matching(args, ctx)[: args.limit]:
            before = conversation.title
            after = f"{args.text} {before}" if args.mode is Mode.PREFIX else args.text
            conversation.title = after[:200]
            conversation.save(update_fields=["title"])
            rows.append({"id": conversation.pk, "before": before, "after": conversation.title})
        ctx.logger.info("renamed %d conversations for user %s", len(rows), ctx.user_id)
        verb = "would rename" if ctx.dry_run else "renamed"
        return ToolResult.ok(
            data={"widget": "table", "columns": ["id", "before", "after"], "rows": rows},
            text=f"{verb} {len(rows)} conversation(s)", shown=True,
        )

    def provide_context(self, ctx: ToolContext) -> str | None:
        from agents_app.models import Conversation

        if ctx.user is None:
            return None
        count = Conversation.objects.filter(tenant_id=ctx.tenant_id, user_id=ctx.user_id).count()
        return (f"sample_retitle: the user {ctx.user.get_username()!r} has {count} conversation(s); "
                "rename them only when they ask.")

    def call_title(self, args: RetitleArgs, configured_name: str) -> str | None:
        return f"Rename conversations matching {args.match!r}"

    def refusal(self, ctx: ToolContext) -> str | None:
        username = ctx.user.get_username() if ctx.user is not None else ""
        if username.startswith("guest"):
            return "guest accounts may not rename conversations"
        return None

    def before_approval(self, args: RetitleArgs, ctx: ToolContext) -> ApprovalCard | None:
        count = self._matching(args, ctx).count()
        if count == 0:
            return ApprovalCard.refused(f"no conversation title contains {args.match!r}: nothing to rename")
        return ApprovalCard.show(f"rename {min(count, args.limit)} conversation(s) matching {args.match!r}")


class WordCountArgs(ToolArgs):
    text: str = Field(max_length=100_000, description="The text to count")


class WordCount(ToolPlugin):
    """The smallest plugin: READ_ONLY (so on for every tenant), no hooks, never touches the database."""

    name = "sample_word_count"
    description = "Count the words and characters of a text."
    args_model = WordCountArgs
    runs_outside_transaction = True

    def execute(self, args: WordCountArgs, ctx: ToolContext) -> ToolResult:
        words = len(args.text.split())
        return ToolResult.ok(data={"words": words, "characters": len(args.text)}, text=f"{words} words")
