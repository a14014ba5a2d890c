"""The system message of a chat: the agent's prompt, then what its tools add for this user."""

from __future__ import annotations

from typing import Any

from agents_app.models import Agent

DEFAULT_SYSTEM_PROMPT = "You are {name}, an assistant on Toolhub. Use the offered tools when they help."


def system_message(agent: Agent, context: str = "") -> dict[str, Any]:
    """The agent's prompt, then what its tools add for this user (their provide_context hooks)."""
    prompt = agent.system_prompt or DEFAULT_SYSTEM_PROMPT.format(name=agent.name)
    return {"role": "system", "content": f"{prompt}\n\n{context}" if context else prompt}
