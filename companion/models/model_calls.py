"""Plumbing for notebooks 03 and 04: look inside what each model call received, and keep the SDK's log warnings.

The hook that records the calls stays in the notebooks (it is a Strands line to learn); these helpers read its record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from companion.support.messages import message_text

__all__ = ["SLIDING_WINDOW_LOGGER", "contains_message", "is_pinned", "mentions", "sdk_warnings"]

# The logger of strands' SlidingWindowConversationManager (it warns when it cannot trim, e.g. all pinned).
SLIDING_WINDOW_LOGGER = "strands.agent.conversation_manager.sliding_window_conversation_manager"


def contains_message(messages: Sequence[dict[str, Any]], text: str, role: str = "user") -> bool:
    """Whether one of `messages` is exactly the message `text` said by `role` (e.g. the prompt of turn 1)."""
    return any(message["role"] == role and message_text(message).strip() == text.strip() for message in messages)


def mentions(messages: Sequence[dict[str, Any]], word: str) -> bool:
    """Whether `word` appears in the text of any of `messages` (user or assistant, tool results included)."""
    return any(word in message_text(message) for message in messages)


def is_pinned(message: dict[str, Any]) -> bool:
    """Whether a message carries the SDK's pin flag (metadata.custom.pinned, set by pin_first or pin_message)."""
    return bool(((message.get("metadata") or {}).get("custom") or {}).get("pinned"))


@contextmanager
def sdk_warnings(logger_name: str = SLIDING_WINDOW_LOGGER, level: int = logging.WARNING) -> Iterator[list[str]]:
    """Collect the log records of one SDK logger as text, instead of letting them print in red on stderr.

    Usage: `with sdk_warnings() as caught: agent(...)`; `caught` then holds each message, e.g. to show in a table.
    """
    caught: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            caught.append(record.getMessage())

    logger = logging.getLogger(logger_name)
    handler = _Collect(level=level)
    old_propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield caught
    finally:
        logger.removeHandler(handler)
        logger.propagate = old_propagate
