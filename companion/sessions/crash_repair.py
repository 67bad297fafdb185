"""A session killed in the middle of a tool call, and the repair of its files before a restore (notebook 01).

A process killed while a tool runs leaves the assistant's `toolUse` as the last message file, with no `toolResult`
after it. strands-agents 1.62 repairs broken tool pairs on restore but leaves the trailing message to
`Agent._convert_prompt_to_messages`, which, when the next prompt arrives, appends a user message with an error
`toolResult` and then the prompt as a second user message. Bedrock's Converse API refuses two user messages in a row
("A conversation must alternate between user and assistant roles..."), so that session can never be resumed there.

:func:`repair_interrupted_tool_use` fixes the files before the restore, through the SDK's own session repository:
it writes the missing `toolResult` (status error, "Tool was interrupted.", the content the SDK itself writes) and an
assistant message that says so, and touches no file that was already there.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import os
from collections.abc import AsyncIterable, Callable
from pathlib import Path
from typing import Any

from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from companion.models.model_wrapper import WrappedModel
from companion.sessions.session_files import check_session, message_files, session_dir
from companion.support.workspace import check_session_id

__all__ = ["INTERRUPTED_REPLY", "RequestLog", "digests", "repair_interrupted_tool_use", "sdk_excerpt",
           "trailing_tool_use_ids"]

INTERRUPTED_REPLY = "My tool call was interrupted before it returned, so I have no result from it."
"""The assistant message the repair writes after the error result, so that user and assistant alternate."""


def trailing_tool_use_ids(storage_dir: str | os.PathLike, session_id: str, agent_id: str = "default") -> list[str]:
    """The toolUse ids of the session's last message when it is the assistant's and has toolUse blocks, else []."""
    check_session_id(session_id)
    files = message_files(storage_dir, session_id, agent_id)
    if not files:
        return []
    from companion.sessions.session_files import read_json

    message = read_json(files[-1])["message"]
    if message.get("role") != "assistant":
        return []
    return [block["toolUse"]["toolUseId"] for block in message.get("content", []) if "toolUse" in block]


def repair_interrupted_tool_use(
    storage_dir: str | os.PathLike, session_id: str, agent_id: str = "default", reply: str = INTERRUPTED_REPLY
) -> list[Path]:
    """Answer a trailing toolUse that has no toolResult, in the session's files, before an agent restores them.

    Writes two messages with the SDK's own SessionMessage and file repository (each with a tracking_id, as the
    agent gives every message): a user message with one error
    toolResult per toolUse id ("Tool was interrupted.", as the SDK writes it) and an assistant message (`reply`).
    Returns the new files; [] when the last message is not a toolUse (nothing written). Refuses an unsafe session id
    (UnsafePathError) and a damaged session (CorruptSessionError naming the file) before writing anything; no
    existing file is changed.
    """
    from strands.session import FileSessionManager
    from strands.tools._tool_helpers import generate_missing_tool_result_content
    from strands.types.content import _ensure_tracking_id
    from strands.types.session import SessionMessage

    check_session_id(session_id)
    check_session_id(agent_id)
    if not session_dir(storage_dir, session_id).is_dir():
        raise FileNotFoundError(f"No session {session_id!r} in {storage_dir}: nothing to repair, nothing written.")
    check_session(storage_dir, session_id)  # every file parses and has the SDK's fields, or the damaged one is named
    tool_use_ids = trailing_tool_use_ids(storage_dir, session_id, agent_id)
    if not tool_use_ids:
        return []
    # FileSessionManager is also the SDK's file repository; on an existing session, creating one writes nothing
    repository = FileSessionManager(session_id=session_id, storage_dir=str(storage_dir))
    last_id = repository.list_messages(session_id, agent_id)[-1].message_id
    added = [
        {"role": "user", "content": generate_missing_tool_result_content(tool_use_ids)},
        {"role": "assistant", "content": [{"text": reply}]},
    ]
    for offset, message in enumerate(added, start=1):
        _ensure_tracking_id(message)  # the durable id the agent gives every message it appends
        repository.create_message(session_id, agent_id, SessionMessage.from_message(message, last_id + offset))
    return message_files(storage_dir, session_id, agent_id)[-len(added):]


def digests(paths: list[Path]) -> dict[str, str]:
    """File name -> SHA-256 of its bytes: to show that a file was not changed."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def sdk_excerpt(function: Callable[..., Any], start: str, stop: str) -> str:
    """The lines of an SDK function from the first containing `start` to the next containing `stop`, numbered as in
    its file (so a reader can find them)."""
    lines, first = inspect.getsourcelines(function)
    begin = next(i for i, line in enumerate(lines) if start in line)
    end = next(i for i in range(begin, len(lines)) if lines[i].strip().startswith(stop))
    source = Path(inspect.getsourcefile(function) or "?")
    parts = source.parts
    shown = "/".join(parts[parts.index("strands"):]) if "strands" in parts else source.name
    width = min(len(line) - len(line.lstrip()) for line in lines[begin:end + 1] if line.strip())
    body = [f"{first + i:5}  {lines[i][width:].rstrip()}" for i in range(begin, end + 1)]
    return "\n".join([f"{shown}, {function.__qualname__}:", *body])


class RequestLog(WrappedModel):
    """Wraps any Strands model and keeps a copy of the messages of every call, as the model received them."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.requests: list[Messages] = []

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        self.requests.append(copy.deepcopy(messages))
        async for event in self.inner.stream(messages, tool_specs, system_prompt, **kwargs):
            yield event
