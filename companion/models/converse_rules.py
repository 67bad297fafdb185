"""What Amazon Bedrock's Converse API refuses in a request, as data, with Bedrock's own error text.

A conversation restored after a crash can hold a `toolUse` with no `toolResult` after it, and Bedrock then refuses
every later call of that session with a ValidationException. The offline model and the local Converse endpoint check
each request against these rules, so such a failure shows offline exactly where it would show on Bedrock.

Each rule is a row of :data:`RULES`: an id, what it checks, Bedrock's message (with the positions filled in), and a
request that breaks it. The messages are the texts Bedrock returns, as reported in public bug reports of the
strands-agents, langchain-aws, litellm and agno projects (2024-2026); :func:`violations` returns them in the order a
request would meet them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from strands.agent.conversation_manager import SummarizingConversationManager

# Amazon Nova Pro's context window, in tokens. The offline model reports the same limit, so threshold arithmetic in the
# notebooks (a ratio of the context window) matches a run on Bedrock.
NOVA_PRO_CONTEXT_WINDOW = 300_000

__all__ = ["RULES", "ConverseSummarizingConversationManager", "ConverseValidationError", "ValidationException",
           "check_request", "rule_rows", "violations"]

Messages = Sequence[dict[str, Any]]

LINEAGE_KEY = "lineage"
"""Where a summary's lineage lives in its message's ``metadata["custom"]`` (as in `companion.memory.lineage`)."""


class ConverseValidationError(ValueError):
    """A request Bedrock's Converse API would refuse; the message is Bedrock's ValidationException text."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


class ValidationException(ConverseValidationError):
    """What the offline model raises for such a request: the same words botocore shows for Bedrock's answer."""

    def __init__(self, rule: str, message: str, operation: str = "ConverseStream") -> None:
        super().__init__(rule, f"An error occurred (ValidationException) when calling the {operation} operation: "
                               f"{message}")
        self.bedrock_message = message


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _first_user(messages: Messages) -> list[str]:
    if messages and messages[0].get("role") != "user":
        return ["A conversation must start with a user message. Try again with a conversation that starts with a "
                "user message."]
    return []


def _alternating(messages: Messages) -> list[str]:
    for before, after in zip(messages, messages[1:]):
        if before.get("role") == after.get("role"):
            return ["A conversation must alternate between user and assistant roles. Make sure the conversation "
                    "alternates between user and assistant roles and try again."]
    return []


def _blank_text(messages: Messages) -> list[str]:
    for i, message in enumerate(messages):
        for j, block in enumerate(_blocks(message)):
            if "text" in block and not str(block["text"]).strip():
                return [f"The text field in the ContentBlock object at messages.{i}.content.{j} is blank. "
                        "Add text to the text field, and try again."]
    return []


def _tool_use_answered(messages: Messages) -> list[str]:
    for i, message in enumerate(messages[:-1]):
        uses = [b["toolUse"]["toolUseId"] for b in _blocks(message) if "toolUse" in b]
        if not uses:
            continue
        answered = {b["toolResult"].get("toolUseId") for b in _blocks(messages[i + 1]) if "toolResult" in b}
        missing = [tool_id for tool_id in uses if tool_id not in answered]
        if missing:
            return [f"Expected toolResult blocks at messages.{i + 1}.content for the following Ids: "
                    + ", ".join(missing)]
    return []


def _tool_result_matched(messages: Messages) -> list[str]:
    for i, message in enumerate(messages):
        results = [b["toolResult"].get("toolUseId") for b in _blocks(message) if "toolResult" in b]
        if not results:
            continue
        previous = _blocks(messages[i - 1]) if i > 0 else []
        uses = {b["toolUse"]["toolUseId"] for b in previous if "toolUse" in b}
        if len(results) > len(uses) or any(tool_id not in uses for tool_id in results):
            return [f"The number of toolResult blocks at messages.{i}.content exceeds the number of toolUse blocks "
                    "of previous turn."]
    return []


RULES: list[dict[str, Any]] = [
    {"id": "first-user", "checks": "the first message is the user's", "check": _first_user,
     "example": [{"role": "assistant", "content": [{"text": "Hello."}]}]},
    {"id": "blank-text", "checks": "no text block is empty or only whitespace", "check": _blank_text,
     "example": [{"role": "user", "content": [{"text": " "}]}]},
    {"id": "tool-use-answered", "checks": "every toolUse is answered by a toolResult in the next message",
     "check": _tool_use_answered,
     "example": [{"role": "user", "content": [{"text": "Look it up."}]},
                 {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "search_memory",
                                                                 "input": {}}}]},
                 {"role": "user", "content": [{"text": "Well?"}]}]},
    {"id": "tool-result-matched", "checks": "every toolResult answers a toolUse of the message before it",
     "check": _tool_result_matched,
     "example": [{"role": "user", "content": [{"text": "Hi."}]},
                 {"role": "assistant", "content": [{"text": "Hello."}]},
                 {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_9", "status": "success",
                                                               "content": [{"text": "42"}]}}]}]},
    {"id": "alternating-roles", "checks": "user and assistant messages alternate", "check": _alternating,
     "example": [{"role": "user", "content": [{"text": "One."}]}, {"role": "user", "content": [{"text": "Two."}]}]},
]


def violations(messages: Messages) -> list[tuple[str, str]]:
    """(rule id, Bedrock's message) of every rule the request breaks, in the order of :data:`RULES`."""
    found: list[tuple[str, str]] = []
    for rule in RULES:
        check: Callable[[Messages], list[str]] = rule["check"]
        found += [(rule["id"], text) for text in check(messages)]
    return found


def check_request(messages: Messages) -> None:
    """Raise :class:`ConverseValidationError` with Bedrock's text for the first rule the request breaks."""
    found = violations(messages)
    if found:
        raise ConverseValidationError(*found[0])


def rule_rows() -> list[dict[str, str]]:
    """The rules as table rows (docs/offline-model.md): what each checks and Bedrock's message for its example."""
    return [{"rule": rule["id"], "checks": rule["checks"], "Bedrock says": violations(rule["example"])[0][1]}
            for rule in RULES]



class ConverseSummarizingConversationManager(SummarizingConversationManager):
    """The SDK's SummarizingConversationManager, changed in two places so that Bedrock accepts every request it causes.

    In strands-agents 1.62 the summary is a user message placed before the messages it keeps; when those start with a
    user message, the next request holds two user messages in a row and Bedrock refuses it ("A conversation must
    alternate between user and assistant roles..."). 1. The split point: the SDK moves it to keep toolUse/toolResult
    pairs together in `_adjust_split_point_for_tool_pairs`, a method it keeps for subclasses to override; this one also
    moves it by one message so that the kept messages start with the assistant's (one more message is summarized when
    the preserved recent messages allow it, else one fewer). 2. The summary call: the SDK sends the folded messages
    followed by the user message "Please summarize this conversation."; once the folded messages end with the user's,
    that call holds two user messages in a row too. This manager sends them instead as one user message wrapped as the
    SDK's own context manager wraps them (``<content>``, a ``\n---\n[role]`` block before each message,
    ``</content>``; strands/_context_manager/methods/summarize.py), under the same summarization system prompt.
    Same settings as the SDK's manager; the summary is still a user message.

    3. Lineage (issue 18): the summary message carries, in ``metadata["custom"]["lineage"]`` (the SDK's free field,
    saved with the summary in agent.json's ``conversation_manager_state``, stripped before every model call), which
    messages it folded: their session indexes and the SDK's ``tracking_id`` of each, the user
    (``agent.state["user_id"]``), the session, and when. A summary that folds an earlier one inherits the messages
    that one folded and names it as a parent, so forgetting a message finds every summary that descends from it. The
    record has the fields of `companion.memory.lineage.LineageRecord` (this layer may not import it; a test reads one
    with it).

    Args:
        clock: Where the lineage's time comes from (default: the current UTC time); the other arguments are the SDK's.
    """

    def __init__(self, *args: Any, clock: Callable[[], datetime] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock or (lambda: datetime.now(UTC))

    def _generate_summary(self, messages: list[Any], agent: Any) -> Any:
        summary = super()._generate_summary(messages, agent)
        summary.setdefault("metadata", {}).setdefault("custom", {})[LINEAGE_KEY] = self._lineage(messages, agent)
        return summary

    def _lineage(self, folded: list[Any], agent: Any) -> dict[str, Any]:
        """What the summary of `folded` descends from (see the class docstring, item 3).

        A message's session index is its `Lineage` hook stamp when it has one; otherwise it is computed as the SDK's
        session manager computes it on restore: the messages removed before this fold, plus the message's place among
        the originals (``removed_message_count`` has already been raised for this fold when this runs).
        """
        previous = self._summary_message
        originals = [m for m in folded if m is not previous]
        removed_before = self.removed_message_count - len(originals)
        indexes: list[int] = []
        ids: list[str] = []
        parents: list[str] = []
        sessions: set[str] = set()
        for position, message in enumerate(originals):
            stamp = ((message.get("metadata") or {}).get("custom") or {}).get(LINEAGE_KEY) or {}
            if "derived" in stamp:  # a folded summary that is not the manager's own (restored, pinned): inherit it
                indexes += stamp.get("messages") or []
                ids += stamp.get("message_ids") or []
                parents += [message["tracking_id"]] if message.get("tracking_id") else []
                continue
            indexes.append(stamp.get("message_index", removed_before + position))
            if stamp.get("session_id"):
                sessions.add(stamp["session_id"])
            ids += [i for i in [message.get("tracking_id") or stamp.get("message_id")] if i]
        if previous is not None and any(m is previous for m in folded):
            earlier = ((previous.get("metadata") or {}).get("custom") or {}).get(LINEAGE_KEY) or {}
            indexes = list(earlier.get("messages") or []) + indexes
            ids = list(earlier.get("message_ids") or []) + ids
            parents = [previous["tracking_id"]] if previous.get("tracking_id") else []
            parents += [p for p in earlier.get("parents") or [] if p not in parents]
        session_id = getattr(getattr(agent, "_session_manager", None), "session_id", None)  # the SDK keeps it private
        record: dict[str, Any] = {"derived": "summary",
                                  "session_id": session_id or (sorted(sessions)[0] if len(sessions) == 1 else None),
                                  "messages": sorted(set(indexes)), "message_ids": list(dict.fromkeys(ids))}
        user = agent.state.get("user_id") if getattr(agent, "state", None) is not None else None
        if isinstance(user, str) and user:
            record["user"] = user
        record["at"] = self.clock().isoformat()
        if parents:
            record["parents"] = parents
        return record

    def _generate_summary_with_model(self, messages: list[Any], agent: Any) -> Any:
        from strands._async import run_async
        from strands.agent.conversation_manager.compression.context_compression import as_user_summary
        from strands.agent.conversation_manager.summarizing_conversation_manager import DEFAULT_SUMMARIZATION_PROMPT
        from strands.event_loop.streaming import process_stream

        from companion.support.messages import CONTENT_CLOSE, CONTENT_OPEN, message_text

        blocks: list[dict[str, Any]] = [{"text": CONTENT_OPEN}]
        for message in messages:
            blocks.append({"text": f"\n---\n[{message['role']}]"})
            blocks += [{"text": text} for text in [message_text(message)] if text.strip()]
        blocks.append({"text": CONTENT_CLOSE})
        request = [{"role": "user", "content": blocks}]
        system_prompt = self.summarization_system_prompt or DEFAULT_SUMMARIZATION_PROMPT

        async def summarize() -> Any:
            reply = None
            async for event in process_stream(agent.aux_model.stream(request, tool_specs=None,
                                                                     system_prompt=system_prompt)):
                if "stop" in event:
                    _, reply, _, _ = event["stop"]
            if reply is None:
                raise RuntimeError("Failed to generate summary: no response from model")
            return as_user_summary(reply)

        return run_async(summarize)

    def _adjust_split_point_for_tool_pairs(self, messages: list[Any], split_point: int) -> int:
        split = super()._adjust_split_point_for_tool_pairs(messages, split_point)
        if 0 < split < len(messages) and messages[split]["role"] == "user":
            later = split + 1
            if later <= len(messages) - self.preserve_recent_messages and later < len(messages):
                return super()._adjust_split_point_for_tool_pairs(messages, later)
            if split > 1:
                return super()._adjust_split_point_for_tool_pairs(messages, split - 1)
        return split
