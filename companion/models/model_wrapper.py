"""A Strands model that wraps another: configuration, context window, token counts and structured output are the
wrapped model's. The workbook's recorders (MeteredModel, CallLog, InstructionFollowingModel) subclass it and override
only `stream`, the one place where they observe or change a call."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from strands.models import Model


class WrappedModel(Model):
    """Delegates everything but `stream` to `inner`; subclasses implement `stream`."""

    def __init__(self, inner: Model) -> None:
        """Wrap `inner`; its configuration and context window are the wrapper's."""
        self.inner = inner

    def update_config(self, **model_config: Any) -> None:
        """Configure the wrapped model."""
        self.inner.update_config(**model_config)

    def get_config(self) -> Any:
        """The wrapped model's configuration (so context_window_limit is the wrapped model's)."""
        return self.inner.get_config()

    async def count_tokens(self, *args: Any, **kwargs: Any) -> int:
        """The wrapped model's estimate."""
        return await self.inner.count_tokens(*args, **kwargs)

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        """Delegated as is: the workbook's lessons do not use structured output, so no wrapper records it."""
        async for event in self.inner.structured_output(*args, **kwargs):
            yield event
