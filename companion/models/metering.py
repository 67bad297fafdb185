"""A model wrapper that records the usage every call reports: the meter behind notebook 07's cost curves."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from companion.models.model_wrapper import WrappedModel
from companion.support.messages import summary_request_kind

T = TypeVar("T", bound=BaseModel)


class MeteredModel(WrappedModel):
    """Wraps any Strands model and appends each call's reported usage to `calls`.

    A call whose last message is the summarizing manager's "Please summarize this conversation." (also what the
    agentic context manager's summarize_context tool sends), or that is the context manager's ``<content>`` summary
    request, is recorded with kind "summary" (and ``request`` "manager" or "context"); every other call with kind
    "turn". Each record also carries `turn`, the value of the `turn`
    attribute when the call was made (set it before each invocation to group a turn's calls, summaries included;
    it stays 0 if you never set it). `last_messages` keeps what the last call sent, after any middleware (such as
    memory injection) changed it. `exchanges` keeps, per call, what the model received (the messages, the system
    prompt and the tool specs), the `turn` label, the text (or tool input) it streamed back and whether it was
    `answered` (False for a call the model refused, such as a request Bedrock rejects: it reports no usage), so a check
    can recount tokens, turn by turn, without trusting the reported usage.
    Works the same on the offline model and on Bedrock, because `calls` holds the usage the model reports, not an
    estimate of its own.
    """

    def __init__(self, inner: Model) -> None:
        """Wrap `inner`; its configuration and context window are the wrapper's."""
        super().__init__(inner)
        self.calls: list[dict[str, Any]] = []
        self.last_messages: Messages = []  # exactly what the last call sent, injected memory included
        self.turn = 0  # a label the caller sets before each invocation; copied into every call record
        self.exchanges: list[dict[str, Any]] = []  # per call: messages and system prompt received, text streamed back

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """Pass the call through and record the usage in its metadata event."""
        request = summary_request_kind(messages)
        kind = "summary" if request else "turn"
        self.last_messages = messages
        exchange: dict[str, Any] = {
            "messages": list(messages), "system_prompt": system_prompt, "tool_specs": list(tool_specs or []), "reply": "",
            "tool_input": "", "turn": self.turn, "answered": False,
        }
        self.exchanges.append(exchange)
        async for event in self.inner.stream(messages, tool_specs, system_prompt, **kwargs):
            delta = event.get("contentBlockDelta", {}).get("delta", {})
            if "text" in delta:
                exchange["reply"] += delta["text"]
            if "toolUse" in delta:
                exchange["tool_input"] += delta["toolUse"].get("input", "")
            if "metadata" in event and "usage" in event["metadata"]:
                usage = event["metadata"]["usage"]
                exchange["answered"] = True
                self.calls.append(
                    {"kind": kind, "input": usage["inputTokens"], "output": usage["outputTokens"], "messages": len(messages),
                     "turn": self.turn, "request": request}
                )
            yield event

