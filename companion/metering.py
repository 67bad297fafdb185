"""A model wrapper that records the usage every call reports: the meter behind notebook 07's cost curves."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from .messages import summary_request_kind

T = TypeVar("T", bound=BaseModel)


class MeteredModel(Model):
    """Wraps any Strands model and appends each call's reported usage to `calls`.

    A call whose last message is the summarizing manager's "Please summarize this conversation." (also what the
    agentic context manager's summarize_context tool sends), or that is the context manager's ``<content>`` summary
    request, is recorded with kind "summary" (and ``request`` "manager" or "context"); every other call with kind
    "turn". Each record also carries `turn`, the value of the `turn`
    attribute when the call was made (set it before each invocation to group a turn's calls, summaries included;
    it stays 0 if you never set it). `last_messages` keeps what the last call sent, after any middleware (such as
    memory injection) changed it. `exchanges` keeps, per call, what the model received (the messages, the system
    prompt and the tool specs) and the text (or tool input) it streamed back, so a check can recount tokens without
    trusting the reported usage.
    Works the same on the offline model and on Bedrock, because `calls` holds the usage the model reports, not an
    estimate of its own.
    """

    def __init__(self, inner: Model) -> None:
        """Wrap `inner`; its configuration and context window are the wrapper's."""
        self.inner = inner
        self.calls: list[dict[str, Any]] = []
        self.last_messages: Messages = []  # exactly what the last call sent, injected memory included
        self.turn = 0  # a label the caller sets before each invocation; copied into every call record
        self.exchanges: list[dict[str, Any]] = []  # per call: messages and system prompt received, text streamed back

    def update_config(self, **model_config: Any) -> None:
        """Configure the wrapped model."""
        self.inner.update_config(**model_config)

    def get_config(self) -> Any:
        """The wrapped model's configuration (so context_window_limit is the wrapped model's)."""
        return self.inner.get_config()

    async def count_tokens(self, *args: Any, **kwargs: Any) -> int:
        """The wrapped model's estimate."""
        return await self.inner.count_tokens(*args, **kwargs)

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
            "tool_input": "",
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
                self.calls.append(
                    {"kind": kind, "input": usage["inputTokens"], "output": usage["outputTokens"], "messages": len(messages),
                     "turn": self.turn, "request": request}
                )
            yield event

    async def structured_output(
        self, output_model: type[T], prompt: Messages, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        """Delegated unmetered: the workbook's lessons do not use structured output."""
        async for event in self.inner.structured_output(output_model, prompt, system_prompt, **kwargs):
            yield event
