"""Reading Strands messages: their text as a model reads it, and the requests and summaries the SDK puts among them.

The offline model, the counters and the metering wrapper all read messages the same way, from here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from strands.types.content import Messages

__all__ = [
    "CONTENT_CLOSE",
    "CONTENT_OPEN",
    "CONTEXT_STATUS_TAG",
    "EXTRACTION_REQUEST",
    "SUMMARIZED_MARKER",
    "SUMMARY_REQUEST",
    "SUMMARY_TITLE",
    "context_status",
    "content_summary_parts",
    "is_content_summary_request",
    "is_context_summary",
    "is_extraction_request",
    "is_summary",
    "is_summary_request",
    "message_text",
    "same_message",
    "summary_request_kind",
    "texts_of",
    "without_context_status",
]

SUMMARY_REQUEST = "Please summarize this conversation."
"""The user message the SDK's summarizing manager appends when it asks a model for a summary."""

SUMMARY_TITLE = "## Conversation Summary"
"""How the offline model's summaries begin, so counters can recognise them among the messages."""

EXTRACTION_REQUEST = "Extract facts from the following transcript:"
"""How the SDK's ModelExtractor opens its request (automatic memory extraction)."""


CONTENT_OPEN, CONTENT_CLOSE = "<content>", "</content>"
"""How the SDK's context manager (``Agent(context_manager="auto")``, strands-agents 1.62.0) wraps what it asks a model
to summarize: one user message whose first text block is ``<content>`` and whose last is ``</content>``, each
summarized message introduced by a ``\n---\n[role]`` block (``strands/_context_manager/methods/summarize.py``)."""

SUMMARIZED_MARKER = "[Summarized: "
"""How the context manager's summary begins: ``[Summarized: N messages, ~T tokens]`` then the summary text."""

CONTEXT_STATUS_TAG = "context-status"
"""The block ``Agent(context_manager="agentic")`` appends to the last message of every model call:
``<context-status><used>U / L tokens (P%)</used><remaining>~R tokens</remaining></context-status>``."""

_ROLE_MARKER = re.compile(r"^\n---\n\[(user|assistant)\]$")
_STATUS_OPEN, _STATUS_CLOSE = f"<{CONTEXT_STATUS_TAG}>", f"</{CONTEXT_STATUS_TAG}>"
_USED = re.compile(r"<used>([\d,]+) / ([\d,]+) tokens")


def texts_of(content: list[dict[str, Any]]) -> list[str]:
    """Every piece of text a model would read in a message's content blocks, tool results included."""
    texts: list[str] = []
    for block in content:
        if "text" in block:
            texts.append(block["text"])
        if "toolResult" in block:
            for item in block["toolResult"].get("content", []):
                if "text" in item:
                    texts.append(item["text"])
                if "json" in item:
                    texts.append(json.dumps(item["json"]))
    return texts


def message_text(message: dict[str, Any]) -> str:
    """All the text of one message as a model reads it, tool results included."""
    return " ".join(texts_of(message["content"]))


def is_summary_request(messages: Messages) -> bool:
    """Whether a call is the summarizing manager asking for a summary (its last message is the request)."""
    last = messages[-1] if messages else None
    return last is not None and last["role"] == "user" and texts_of(last["content"])[-1:] == [SUMMARY_REQUEST]


def is_extraction_request(message: dict[str, Any] | None) -> bool:
    """Whether a user message is the SDK's memory-extraction request."""
    return message is not None and message_text(message).startswith(EXTRACTION_REQUEST)


def same_message(message: dict[str, Any], other: dict[str, Any] | None) -> bool:
    """Whether two messages have the same role and content (the SDK may add metadata such as a tracking id)."""
    return other is not None and message["role"] == other.get("role") and message["content"] == other.get("content")


def is_summary(message: dict[str, Any], known: Sequence[dict[str, Any] | None] | None = None) -> bool:
    """Whether a message is a summary the SDK's summarizing manager inserted (as a user message).

    With `known`, the summary message(s) the SDK recorded (the manager's ``_summary_message``, agent.json's
    ``conversation_manager_state["summary_message"]``): whether `message` is one of them, whatever its wording. Without
    it, the plain offline voice's title: a guess by wording that fails on any other model.
    """
    if known is not None:
        return any(same_message(message, summary) for summary in known)
    return message["role"] == "user" and message_text(message).lstrip().startswith(SUMMARY_TITLE)


def is_content_summary_request(messages: Messages) -> bool:
    """Whether a call is the SDK's context manager asking for a summary: a single user message wrapped in
    ``<content>`` ... ``</content>`` text blocks (the "auto" preset's summarize strategy)."""
    if len(messages) != 1 or messages[0]["role"] != "user":
        return False
    texts = [block.get("text") for block in messages[0]["content"]]
    return len(texts) >= 2 and texts[0] == CONTENT_OPEN and texts[-1] == CONTENT_CLOSE


def content_summary_parts(message: dict[str, Any]) -> list[tuple[str, str]]:
    """The messages inside a context-manager summary request, as (role, text), in order: each starts at a
    ``\n---\n[role]`` block and takes the text blocks up to the next one."""
    parts: list[tuple[str, list[str]]] = []
    for block in message["content"]:
        text = block.get("text")
        if text is None or text in (CONTENT_OPEN, CONTENT_CLOSE):
            continue
        marker = _ROLE_MARKER.match(text)
        if marker:
            parts.append((marker.group(1), []))
        elif parts:
            parts[-1][1].append(text)
    return [(role, " ".join(texts)) for role, texts in parts]


def summary_request_kind(messages: Messages) -> str | None:
    """ "manager" for the summarizing manager's (and summarize_context's) "Please summarize this conversation.",
    "context" for the context manager's ``<content>`` request, None for any other call."""
    if is_summary_request(messages):
        return "manager"
    if is_content_summary_request(messages):
        return "context"
    return None


def is_context_summary(message: dict[str, Any]) -> bool:
    """Whether a message carries a summary the context manager wrote (a text block starting ``[Summarized: ``)."""
    return any(block.get("text", "").startswith(SUMMARIZED_MARKER) for block in message["content"])


def _status_blocks(text: str) -> list[tuple[int, int, str]]:
    """(start, end, inside) of each ``<context-status>`` block, found with str.find in one pass (linear time)."""
    blocks, position = [], 0
    while (start := text.find(_STATUS_OPEN, position)) >= 0:
        end = text.find(_STATUS_CLOSE, start)
        if end < 0:
            break
        blocks.append((start, end + len(_STATUS_CLOSE), text[start + len(_STATUS_OPEN) : end]))
        position = end + len(_STATUS_CLOSE)
    return blocks


def without_context_status(text: str) -> str:
    """The text with any ``<context-status>`` block the agentic context manager appended removed."""
    if _STATUS_OPEN not in text:
        return text
    pieces, done = [], 0
    for start, end, _ in _status_blocks(text):
        pieces.append(text[done:start].rstrip())
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def context_status(text: str) -> tuple[int, int] | None:
    """(tokens used, context window) from the last ``<context-status>`` block in a text, or None without one."""
    blocks = _status_blocks(text) if _STATUS_OPEN in text else []
    used = _USED.search(blocks[-1][2]) if blocks else None
    if used is None:
        return None
    return int(used.group(1).replace(",", "")), int(used.group(2).replace(",", ""))
