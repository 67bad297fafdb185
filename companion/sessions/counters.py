"""What the model sees versus what the session stores, counted after every turn; and where a fact was in each model
call of a scripted conversation (`converse`, notebook 04)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from strands import Agent
from strands.hooks import BeforeModelCallEvent

from companion.sessions.session_files import agent_dir, message_files, read_json
from companion.support.messages import is_summary, message_text

__all__ = ["converse", "turn_counters"]


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


def converse(agent: Agent, prompts: Sequence[str], fact: str) -> list[dict[str, Any]]:
    """Send `prompts` to `agent`, one invocation each, and return a row per turn: where `fact` was in what that turn's
    model call received (its messages, its system prompt, its tool specs: "nowhere" if in none), the input tokens the
    invocation reported, and the reply.

    What the call received is read by a `BeforeModelCallEvent` hook just before the call, as in notebook 03. The agent
    must make one model call per invocation (no tools): a turn that made another number of calls raises ValueError.
    """
    seen: list[dict[str, bool]] = []

    def where(event: BeforeModelCallEvent) -> None:
        caller = event.agent
        seen.append({"messages": any(fact in message_text(message) for message in caller.messages),
                     "system prompt": fact in str(caller.system_prompt or ""),
                     "tool specs": fact in json.dumps(caller.tool_registry.get_all_tool_specs(), ensure_ascii=False)})

    agent.add_hook(where, BeforeModelCallEvent)
    rows = []
    for turn, prompt in enumerate(prompts, start=1):
        result = agent(prompt)
        if len(seen) != turn:
            raise ValueError(f"turn {turn} made {len(seen) - turn + 1} model calls: converse reads one a turn (no tools)")
        places = [place for place, found in seen[-1].items() if found]
        rows.append({"turn": turn, f"{fact} sent in": ", ".join(places) or "nowhere",
                     "input tokens": result.metrics.latest_agent_invocation.usage["inputTokens"],
                     "reply": str(result).strip()})
    return rows
