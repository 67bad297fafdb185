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
from strands.models import Model
from strands.types.content import Messages

from companion.support.messages import SUMMARIZED_MARKER

__all__ = [
    "PRESETS",
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

