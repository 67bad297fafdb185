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
from typing import Any

from strands.agent.conversation_manager import SummarizingConversationManager

# Amazon Nova Pro's context window, in tokens. The offline model reports the same limit, so threshold arithmetic in the
# notebooks (a ratio of the context window) matches a run on Bedrock.
NOVA_PRO_CONTEXT_WINDOW = 300_000

__all__ = ["RULES", "ConverseSummarizingConversationManager", "ConverseValidationError", "ValidationException",
           "check_request", "rule_rows", "violations"]

Messages = Sequence[dict[str, Any]]


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
    """The rules as table rows (notebook 00): what each checks and Bedrock's message for its example."""
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
    """

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
