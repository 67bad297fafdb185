"""Notebook 05's witnesses: a model wrapper that logs every call the model receives (summary requests included), the
SDK's selection rule restated for checking it, a log capture that turns the SDK's warnings into table cells, and
`play_turns`, the lesson's turn loop, which writes one table row per turn.

The summarizing manager's summary call bypasses the agent's hooks (it calls ``model.stream`` directly), and its
``removed_message_count`` does not move when the only message it folds is its own previous summary. So the one place
where every summary call can be counted is the model: `CallLog` sits between the agent and the model and writes down
each call as it arrives.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Message, Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from companion.models.converse_rules import violations
from companion.models.model_wrapper import WrappedModel
from companion.support.messages import (
    SUMMARIZED_MARKER,
    content_summary_parts,
    is_summary,
    message_text,
    summary_request_kind,
)

__all__ = ["CallLog", "captured_log", "play_turns", "sdk_selection", "sent_to_summarizer", "summary_call_lines",
           "summary_calls_per_turn", "turn_of_calls"]

T = TypeVar("T", bound=BaseModel)


class CallLog(WrappedModel):
    """Wraps any Strands model and appends one record per call to `calls`, in the order the calls arrive.

    A record: ``kind`` ("summary" when the last message is the summarizing manager's "Please summarize this
    conversation.", or when the call is the context manager's ``<content>`` request, else "turn"); ``request``
    ("manager", "context" or None); ``messages``: how many messages came with it (for a summary call, the messages to
    summarize: the request itself not counted, and for a ``<content>`` request the messages wrapped inside it);
    ``previous_summary``: whether a summary call's first message is an earlier summary (or, for a ``<content>``
    request, carries one); ``texts``: a summary call's messages as text; ``tools``: the names of the tools offered;
    ``roles``: the role of each message received; ``refused``: (rule, Bedrock's message) for each Converse rule the
    request breaks (companion/models/converse_rules.py; empty when Bedrock would accept it); ``reply``: the text answered;
    ``outcome``: "ok", or "error" when the wrapped model raised (a context overflow, for example).

    `summaries`, when given, returns the summary message(s) the SDK recorded so far (e.g. ``lambda:
    [manager._summary_message]``, read as each call arrives, before the manager replaces it): a previous summary is
    recognised as one of them, whatever its wording. Without it, by the plain offline voice's title (and, in a
    ``<content>`` request, by the context manager's ``[Summarized: `` marker either way).
    """

    def __init__(self, inner: Model, summaries: Callable[[], list[Message | None]] | None = None) -> None:
        """Wrap `inner`; its configuration and context window are the wrapper's."""
        super().__init__(inner)
        self.calls: list[dict[str, Any]] = []
        self.summaries = summaries

    def _is_previous_summary(self, text: str, message: dict[str, Any] | None = None) -> bool:
        if self.summaries is not None:
            known = [m for m in self.summaries() if m]
            if message is not None:
                return is_summary(message, known)
            return any(text == message_text(m) for m in known)
        return message is not None and is_summary(message)

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """Record the call as it arrives, pass it through, and mark whether the wrapped model answered or raised."""
        request = summary_request_kind(messages)
        if request == "context":
            texts = [text for _, text in content_summary_parts(messages[0])]
            previous = bool(texts) and (SUMMARIZED_MARKER in texts[0] or self._is_previous_summary(texts[0]))
        else:
            folded = messages[:-1] if request else messages
            texts = [message_text(m) for m in folded] if request else []
            previous = bool(request and folded and self._is_previous_summary(texts[0], folded[0]))
        record = {
            "kind": "summary" if request else "turn",
            "request": request,
            "messages": len(texts) if request else len(messages),
            "previous_summary": previous,
            "texts": texts,
            "tools": [spec["name"] for spec in tool_specs or []],
            "roles": [m["role"] for m in messages],
            "refused": violations(messages),
            "reply": "",
            "outcome": "pending",
        }
        self.calls.append(record)
        try:
            async for event in self.inner.stream(messages, tool_specs, system_prompt, **kwargs):
                delta = event.get("contentBlockDelta", {}).get("delta", {}) if isinstance(event, dict) else {}
                record["reply"] += delta.get("text", "")
                yield event
        except Exception:
            record["outcome"] = "error"
            raise
        record["outcome"] = "ok"



def play_turns(agent: Any, prompts: list[str], projected: list[int], threshold: float) -> list[dict[str, Any]]:
    """Send each prompt to `agent` and return one row per turn, so notebook 05's cell shows only the SDK's parts.

    `agent.model` must be a MeteredModel (its calls are labelled with the turn, summary calls included) and
    `projected` the list a ``BeforeModelCallEvent`` hook fills with ``projected_input_tokens``, one per turn. A row:
    ``held`` (the messages the turn's call holds before any summary, its prompt included), ``projected``, ``over
    threshold`` (projected / context window ≥ `threshold`), ``summary calls`` (counted at the model),
    ``removed_message_count`` after the turn, and the ``reply``.
    """
    meter, manager = agent.model, agent.conversation_manager
    rows = []
    for turn, prompt in enumerate(prompts, start=1):
        meter.turn = turn
        held = len(agent.messages) + 1
        reply = str(agent(prompt)).strip()
        kinds = [call["kind"] for call in meter.calls if call["turn"] == turn]
        rows.append({"turn": turn, "held": held, "projected": projected[-1],
                     "over threshold": meter.estimate_utilization(projected[-1]) >= threshold,
                     "summary calls": kinds.count("summary"),
                     "removed_message_count": manager.removed_message_count,
                     "reply": reply})
    return rows


def sent_to_summarizer(messages: Messages) -> list[tuple[str, str]] | None:
    """What a summary call hands the model to summarize, as (role, text) per message, in order; None for any other call.

    The SDK's summarizing manager sends the messages themselves, then "Please summarize this conversation."; a
    ``<content>`` request (the context manager's, and ConverseSummarizingConversationManager's) wraps them in one user
    message.
    """
    kind = summary_request_kind(messages)
    if kind == "manager":
        return [(message["role"], message_text(message)) for message in messages[:-1]]
    if kind == "context":
        return content_summary_parts(messages[0])
    return None


def summary_call_lines(exchanges: list[dict[str, Any]]) -> list[str]:
    """Each summary call among a MeteredModel's exchanges, as two lines to print: its turn with every message it
    received, and what it wrote. The summary the call before wrote is named, not printed again, in what a call received
    and in what it wrote when it wrote it again word for word: a reader sees at once which prompts each call folded,
    and which calls changed nothing (notebook 05)."""
    lines: list[str] = []
    before = None
    for call in exchanges:
        received = sent_to_summarizer(call["messages"])
        if received is None:
            continue
        parts = ["the summary before" if text.strip() == before else f"[{role}] " + " / ".join(text.splitlines())
                 for role, text in received]
        wrote = (call.get("reply") or "").strip()
        lines.append(f"turn {call['turn']} received: " + " + ".join(parts))
        lines.append("       wrote:    " + ("the same summary again" if wrote == before else " / ".join(wrote.splitlines())))
        before = wrote
    return lines


def summary_calls_per_turn(calls: list[dict[str, Any]], turns: int) -> list[list[dict[str, Any]]]:
    """The summary calls of each turn, read from the order of the calls alone.

    In a conversation without tools every turn ends with one answered "turn" call; the summary calls that arrive
    before it (proactive: just before the call; reactive: between the overflowing call and its retry) are that turn's.
    """
    per_turn: list[list[dict[str, Any]]] = [[] for _ in range(turns)]
    turn = 0
    for call in calls:
        if turn >= turns:
            raise ValueError(f"more answered turn calls than the {turns} turns given")
        if call["kind"] == "summary":
            per_turn[turn].append(call)
        elif call["outcome"] == "ok":
            turn += 1
    return per_turn


def turn_of_calls(calls: list[dict[str, Any]]) -> list[int]:
    """The turn (1, 2, ...) of each call, read from the order of the calls alone: in a conversation without tools a
    turn ends with its one answered "turn" call (as in :func:`summary_calls_per_turn`)."""
    turns, turn = [], 1
    for call in calls:
        turns.append(turn)
        if call["kind"] == "turn" and call["outcome"] == "ok":
            turn += 1
    return turns


def sdk_selection(messages: int, summary_ratio: float, preserve_recent_messages: int) -> int:
    """How many of `messages` the SDK's summarizing manager hands to the summarizer (0: it cannot summarize).

    Restates SummarizingConversationManager._summarize_oldest in strands-agents 1.62.0 for a conversation without
    tool calls or pinned messages: max(1, int(messages * ratio)) with the ratio clamped to 0.1..0.8, capped so that
    `preserve_recent_messages` stay; zero or less raises "insufficient messages for summarization".
    """
    ratio = max(0.1, min(0.8, summary_ratio))
    count = min(max(1, int(messages * ratio)), messages - preserve_recent_messages)
    return max(0, count)


class _Collect(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(level=logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


@contextmanager
def captured_log(name: str = "strands") -> Iterator[list[str]]:
    """Collect the warnings and errors the SDK logs inside the block as "LEVEL: message" lines, instead of letting
    them print to stderr; yields the list, which fills as the block runs."""
    lines: list[str] = []
    logger = logging.getLogger(name)
    handler = _Collect(lines)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


