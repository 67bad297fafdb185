"""Hand-built memory: store every message, prune on read.

The design follows the article *Memoria en agentes de IA: sesión, persistencia y context window con Strands* (Hazel
Sáenz, Strands series), written anew here. The SDK ships the same two strategies as conversation managers
(SlidingWindowConversationManager truncates, SummarizingConversationManager summarizes). Notebook 07 runs this
hand-built version beside them on the same script, so the mechanism is visible instead of hidden inside a manager.

The strategies live in one table, `STRATEGIES`: a new strategy is one function and one entry.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from strands.types.content import Message

from companion.support.workspace import check_session_id

Summarizer = Callable[[list[Message]], str]


def count_tokens(messages: list[Message]) -> int:
    """Estimate tokens as the SDK's heuristic does for text: ceil(characters / 4) per text block."""
    return sum(math.ceil(len(block["text"]) / 4) for m in messages for block in m["content"] if "text" in block)


def truncate(messages: list[Message], *, max_tokens: int, summarizer: Summarizer | None, preserve_recent: int) -> list[Message]:
    """Keep the newest messages that fit in `max_tokens`, starting at a user message. Free: no model call."""
    kept: list[Message] = []
    for message in reversed(messages):
        if count_tokens(kept + [message]) > max_tokens:
            break
        kept.insert(0, message)
    while kept and kept[0]["role"] != "user":
        kept.pop(0)
    return kept


def summarize(messages: list[Message], *, max_tokens: int, summarizer: Summarizer | None, preserve_recent: int) -> list[Message]:
    """Replace all but the `preserve_recent` newest messages with one user-role summary: one extra model call."""
    if summarizer is None:
        raise ValueError("The 'summarize' strategy needs a summarizer: a function from messages to summary text.")
    keep = max(0, min(preserve_recent, len(messages) - 1))
    older, recent = messages[: len(messages) - keep], messages[len(messages) - keep :]
    summary: Message = {"role": "user", "content": [{"text": summarizer(older).strip()}]}
    return [summary, *recent]


def join_user_messages(messages: list[Message]) -> list[Message]:
    """The same messages, with each run of user messages in a row joined into one user message (their content blocks
    in order). Bedrock's Converse API refuses two user messages in a row ("A conversation must alternate between user
    and assistant roles..."), and a summary is a user message: put before kept messages that start with a user message,
    it makes such a pair. Joining them keeps every word and sends one user message. The input list is never modified."""
    joined: list[Message] = []
    for message in messages:
        if joined and joined[-1]["role"] == "user" == message["role"]:
            joined[-1] = {**joined[-1], "content": [*joined[-1]["content"], *message["content"]]}
        else:
            joined.append(message)
    return joined


# name -> function(messages, *, max_tokens, summarizer, preserve_recent) -> the view to send. Add a strategy here.
STRATEGIES: dict[str, Callable[..., list[Message]]] = {
    "truncate": truncate,
    "summarize": summarize,
}


def prune(
    messages: list[Message],
    *,
    strategy: str = "truncate",
    max_tokens: int = 4000,
    summarizer: Summarizer | None = None,
    preserve_recent: int = 2,
) -> list[Message]:
    """The view of `messages` to send to the model, within `max_tokens`. The input list is never modified.

    Within budget: everything, at no cost. Over it: the strategy named in STRATEGIES decides.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown pruning strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}.")
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens!r}")
    if count_tokens(messages) <= max_tokens or len(messages) <= 1:
        return list(messages)
    return STRATEGIES[strategy](list(messages), max_tokens=max_tokens, summarizer=summarizer, preserve_recent=preserve_recent)


class JsonHistoryStore:
    """Every message of a session in one JSON file, <base_dir>/session_<id>/messages.json, written atomically."""

    def __init__(self, base_dir: str | os.PathLike) -> None:
        """Keep sessions under `base_dir` (pass a workspace folder; nothing is written elsewhere)."""
        self.base_dir = Path(base_dir)

    def path(self, session_id: str) -> Path:
        """Where a session's history lives."""
        return self.base_dir / f"session_{check_session_id(session_id)}" / "messages.json"

    def load(self, session_id: str) -> list[Message]:
        """The stored history, or an empty list for a new session."""
        path = self.path(session_id)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []

    def save(self, session_id: str, messages: list[Message]) -> None:
        """Replace the stored history; a crash mid-write leaves the previous file intact."""
        path = self.path(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(messages, file)
        os.replace(temporary, path)
