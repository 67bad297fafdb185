"""Reading Strands messages: their text as a model reads it, and the requests and summaries the SDK puts among them.

The offline model, the counters and the metering wrapper all read messages the same way, from here.
"""

from __future__ import annotations

import json
from typing import Any

from strands.types.content import Messages

__all__ = [
    "EXTRACTION_REQUEST",
    "SUMMARY_REQUEST",
    "SUMMARY_TITLE",
    "is_extraction_request",
    "is_summary",
    "is_summary_request",
    "message_text",
    "texts_of",
]

SUMMARY_REQUEST = "Please summarize this conversation."
"""The user message the SDK's summarizing manager appends when it asks a model for a summary."""

SUMMARY_TITLE = "## Conversation Summary"
"""How the offline model's summaries begin, so counters can recognise them among the messages."""

EXTRACTION_REQUEST = "Extract facts from the following transcript:"
"""How the SDK's ModelExtractor opens its request (automatic memory extraction)."""


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


def is_summary(message: dict[str, Any]) -> bool:
    """The SDK's summarizing manager inserts its summary as a user message; the offline model titles it so."""
    return message["role"] == "user" and message_text(message).lstrip().startswith(SUMMARY_TITLE)
