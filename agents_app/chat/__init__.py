"""Chat runs: the agent loop over a toolset assembled in-process, outside any transaction, audited and persisted.

A run is an iterator of (event, data) tuples (`ChatRun`). Its state (`RunState`) is the OpenAI-format transcript
kept in `Conversation.run_state["messages"]` plus the map of approval keys to Approval rows; closing the run early
(a client that hangs up) still persists a consistent transcript. One job a module: `prepare` loads a run in a
short transaction, `hooks` are what the loop calls back (tool calls through invoke, screening, the system prompt),
`events` shape the loop's events for the client, `client_requests` answers a server's own requests mid-call,
`persist` stores what happened, and `run` ties them together.
"""

from agents_app.chat.run import ChatRun, chat_start, conversation_resume
from agents_app.chat.state import RunState

__all__ = ["ChatRun", "RunState", "chat_start", "conversation_resume"]
