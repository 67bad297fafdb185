"""The SDK's context managers, read from the installed source: ``Agent(context_manager="auto" | "agentic")``.

strands-agents 1.62.0 ships, beside the conversation managers the series teaches, an experimental ``ContextManager``
(``strands/_context_manager/``). The preset strings build it with an ordered list of strategies; this module reads
those strategies, the tools each preset adds to the agent and what their specs cost per call, so the notebooks print
the SDK's own numbers instead of restating them. It also restates the one selection rule notebook 05 checks.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

from strands import Agent
from strands._context_manager.context_manager import ContextManager
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.models import Model
from strands.types.content import Messages

from .messages import SUMMARIZED_MARKER

__all__ = [
    "PRESETS",
    "JoinedSummaryConversationManager",
    "auto_selection",
    "injected_tools",
    "preset_strategies",
    "spec_tokens",
    "summary_blocks",
    "summary_utilization",
]

PRESETS = ("auto", "agentic")
"""The preset strings ``Agent(context_manager=...)`` accepts in strands-agents 1.62.0."""


def preset_strategies(preset: str) -> list[dict[str, Any]]:
    """The strategy pipeline a preset builds, as rows: name, target, and the conditions that make it act.

    Read from the ContextManager the SDK builds for the preset (its private attributes, so a release that renames them
    fails here loudly instead of printing stale numbers).
    """
    manager = ContextManager.from_strategy(preset)  # type: ignore[arg-type]
    rows = []
    for strategy in manager._strategies:
        rows.append({
            "strategy": strategy.name,
            "target": getattr(strategy, "_target", None),
            "tokens per block over": getattr(strategy, "_threshold", None),
            "utilization at least": getattr(strategy, "_utilization_threshold", None),
            "keeps newest messages": int(getattr(strategy, "_preserve_recent", 0)) or None,
        })
    return rows


def summary_utilization(preset: str = "auto") -> float:
    """The utilization (projected input / context window) at which a preset's summarize strategy acts: 0.85 for
    "auto", 1 (only when full) for "agentic" in strands-agents 1.62.0."""
    for row in preset_strategies(preset):
        if row["strategy"] == "offload:summarize":
            return float(row["utilization at least"])
    raise ValueError(f"the {preset!r} preset has no summarize strategy")


def spec_tokens(spec: dict[str, Any]) -> int:
    """What one tool spec adds to every call's input by the SDK's estimate (JSON: characters / 2)."""
    return math.ceil(len(json.dumps(spec)) / 2)


def injected_tools(preset: str, model: Model) -> dict[str, int]:
    """The tools an agent built with the preset (and no tools of its own) offers the model, with each spec's tokens."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = Agent(model=model, context_manager=preset, callback_handler=None)  # type: ignore[arg-type]
    specs = agent.tool_registry.get_all_tool_specs()
    return {spec["name"]: spec_tokens(spec) for spec in specs}


def auto_selection(held: int, keep_newest: int = 4) -> int:
    """How many messages the "auto" preset's summarize strategy sends to the summarizer when it acts on a call whose
    history holds `held` messages (a conversation without tool calls or pins): all but the first message and the
    `keep_newest` newest; 0 when that leaves none. Restates ``_get_eligible_messages`` of strands-agents 1.62.0."""
    return max(0, held - 1 - keep_newest)


def summary_blocks(messages: Messages) -> list[tuple[int, str, str]]:
    """The context manager's summaries in a history: (message index, role, text) of each ``[Summarized: ...]`` block."""
    return [
        (index, message["role"], block["text"])
        for index, message in enumerate(messages)
        for block in message["content"]
        if block.get("text", "").startswith(SUMMARIZED_MARKER)
    ]


class JoinedSummaryConversationManager(SummarizingConversationManager):
    """The SDK's SummarizingConversationManager, same settings, whose requests always alternate user and assistant.

    strands-agents 1.62 puts its summary, a user message, before the messages it keeps; when those start with a user
    message, the next request holds two user messages in a row and Bedrock refuses it ("A conversation must alternate
    between user and assistant roles..."). Moving the split point so the kept messages start with the assistant's
    (`companion.converse_rules.AlternatingSummarizingConversationManager`) moves the problem into the summarization
    call: the summarized messages then end with a user message, and the SDK appends its user request "Please summarize
    this conversation." after it. This manager moves the split point the other way when needed (one message later if
    the preserved recent messages allow it, else one earlier), so the summarized messages end with the assistant's and
    the summarization call alternates; then it joins the first kept message, a user message, into the summary message
    (its blocks after the summary's), so the next request alternates too. No word is dropped; the joined message is
    counted as summarized for session restore.
    """

    def _adjust_split_point_for_tool_pairs(self, messages: list[Any], split_point: int) -> int:
        split = super()._adjust_split_point_for_tool_pairs(messages, split_point)
        if 0 < split < len(messages) and messages[split]["role"] != "user":
            if split + 1 <= len(messages) - self.preserve_recent_messages:
                return super()._adjust_split_point_for_tool_pairs(messages, split + 1)
            if split > 1:
                return super()._adjust_split_point_for_tool_pairs(messages, split - 1)
        return split

    def _summarize_oldest(self, agent: Agent) -> None:
        super()._summarize_oldest(agent)
        summary = self._summary_message
        at = next(i for i, message in enumerate(agent.messages) if message is summary)
        if at + 1 < len(agent.messages) and agent.messages[at + 1]["role"] == "user":
            kept = agent.messages.pop(at + 1)
            summary["content"] = [*summary["content"], *kept["content"]]
            self.removed_message_count += 1
