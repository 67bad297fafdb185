"""What the model sees versus what the session stores, counted after every turn."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from strands import Agent

from companion.sessions.session_files import agent_dir, message_files, read_json
from companion.support.messages import is_summary, message_text

__all__ = ["turn_counters"]


def turn_counters(
    agent: Agent,
    storage_dir: str | os.PathLike,
    session_id: str,
    fact: str,
    agent_id: str = "default",
    summaries: Sequence[dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Counters after a turn.

    visible (also named kept): len(agent.messages) after the turn, i.e. after the conversation manager's trim at the
    end of the invocation. The next call receives these messages plus its new prompt (with the default per_turn=False);
    the call that just ended may have received more. To know what a call received, record it with a
    BeforeModelCallEvent hook (notebooks 03 and 04).
    stored: message files the session wrote; removed: removed_message_count from agent.json;
    summaries: summary messages among the kept ones: those equal to a message of `summaries` (the summary the SDK
    recorded, e.g. ``agent.conversation_manager._summary_message``) when given, else recognised by the plain offline
    voice's title; fact_visible: whether `fact` appears in a kept message.
    """
    record = read_json(agent_dir(storage_dir, session_id, agent_id) / "agent.json")
    return {
        "visible": len(agent.messages),
        "kept": len(agent.messages),
        "stored": len(message_files(storage_dir, session_id, agent_id)),
        "removed": record["conversation_manager_state"]["removed_message_count"],
        "summaries": sum(1 for m in agent.messages if is_summary(m, summaries)),
        "fact_visible": any(fact in message_text(m) for m in agent.messages),
    }
