"""Lineage: where each derived memory came from, so it can be shown, checked against the session, and forgotten.

Everything the workbook derives from a conversation (a store record, a summary, an `agent.state` entry, a vector row,
a line of a markdown file) records the same `LineageRecord`: the user, the session and the messages it came from (the
session's message indexes, the `message_<index>.json` files, and the SDK's own `tracking_id` of each message), how it
was derived, and when. Forgetting needs exactly that: the artifacts that descend from the messages stating a fact.

The record lives in the SDK's own places for metadata where they exist:
- a message: `message["metadata"]["custom"]["lineage"]` (the SDK's free field, stripped before every model call).
  A `Lineage` hook stamps each added message there with its session and index, in memory: the session manager has
  saved the message before a later hook runs, and on disk the file's name (`message_<index>.json`) is the index and
  the file holds the message's `tracking_id`. A summary message carries its whole record there, and so in
  `conversation_manager_state["summary_message"]` of agent.json;
- a memory record: the SDK's `metadata` that `MemoryStore.add` receives and `ExtractionResult` carries
  (`LineageExtractor` fills it for each extracted fact);
- `agent.state` has no metadata slot: `write_state` keeps each entry's record under the reserved state key
  `STATE_LINEAGE_KEY`, which `manifest_state` leaves out of anything sent to a model;
- a markdown line: an HTML comment at the end of the line (`markdown_line` / `read_markdown_lineage`), invisible when
  rendered, kept on the same line so an update stays a one-line diff.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "DERIVATIONS",
    "LINEAGE_KEY",
    "STATE_LINEAGE_KEY",
    "Lineage",
    "LineageExtractor",
    "LineageRecord",
    "announced_tool_lineage",
    "derived_lineage",
    "lineage",
    "lineage_of_messages",
    "manifest_state",
    "markdown_line",
    "message_id",
    "message_lineage",
    "messages_named",
    "read_markdown_lineage",
    "state_lineage",
    "write_state",
]

LINEAGE_KEY = "lineage"
"""Where lineage lives: in a message's `metadata["custom"]` and in a record's `metadata`."""

STATE_LINEAGE_KEY = "lineage"
"""The `agent.state` key under which `write_state` keeps each entry's lineage ({state key: record})."""

DERIVATIONS = ("dump", "extraction", "summary", "state write", "tool call", "embedding", "direct write", "add")
"""How a memory can be derived: a message copied as it is (dump), facts a model extracted, a summary of folded
messages, an `agent.state` entry a hook or code wrote, an `add_memory` tool call, a vector computed from a text, a
write by code with no message behind it, or "add": the SDK's `add` reached with no lineage (a tool call or an
extraction on an agent without a `Lineage` hook), so its messages are unknown."""


@dataclass(frozen=True)
class LineageRecord:
    """Where one derived memory came from.

    Attributes:
        derived: How it was derived (one of `DERIVATIONS`).
        session_id: The session of its messages (None: no session, or written by code).
        messages: The session's indexes of those messages (`message_<index>.json`).
        message_ids: The SDK's `tracking_id` of those messages (durable across save and restore).
        user: Whose memory it is (None: unscoped).
        at: When it was derived (ISO 8601).
        tool_use_id: The `toolUse` that wrote it, for a tool call.
        parents: Ids of the artifacts it was computed from when that is not a message: the record an embedding was
            computed from, an earlier summary folded into this one.
    """

    derived: str
    session_id: str | None = None
    messages: tuple[int, ...] = ()
    message_ids: tuple[str, ...] = ()
    user: str | None = None
    at: str | None = None
    tool_use_id: str | None = None
    parents: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.derived not in DERIVATIONS:
            raise ValueError(f"derived must be one of {DERIVATIONS}, got {self.derived!r}")
        object.__setattr__(self, "messages", tuple(sorted(set(self.messages))))
        object.__setattr__(self, "message_ids", tuple(dict.fromkeys(self.message_ids)))
        object.__setattr__(self, "parents", tuple(dict.fromkeys(self.parents)))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: derived, session_id and messages always; the other fields only when set."""
        data: dict[str, Any] = {"derived": self.derived, "session_id": self.session_id, "messages": list(self.messages)}
        for name in ("message_ids", "user", "at", "tool_use_id", "parents"):
            value = getattr(self, name)
            if value:
                data[name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LineageRecord:
        """Read a record's JSON form back; keys a reader adds (replaced_by, restated_in) are left out."""
        return cls(
            derived=data["derived"],
            session_id=data.get("session_id"),
            messages=tuple(data.get("messages") or ()),
            message_ids=tuple(data.get("message_ids") or ()),
            user=data.get("user"),
            at=data.get("at"),
            tool_use_id=data.get("tool_use_id"),
            parents=tuple(data.get("parents") or ()),
        )

    def at_time(self, when: datetime | str) -> LineageRecord:
        """The same record, stamped with when it was derived."""
        return replace(self, at=when.isoformat() if isinstance(when, datetime) else when)

    def named(self) -> str:
        """How a person reads it: 'extraction from session ada-selective, messages 58, 59'."""
        return f"{self.derived} from {messages_named(self.to_dict())}"


# ---------------------------------------------------------------------- messages


def message_lineage(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a message's `metadata["custom"]["lineage"]` holds: a `Lineage` hook's stamp ({"session_id",
    "message_index", "message_id"}) or, for a summary, its whole record; None when unstamped."""
    custom = (message.get("metadata") or {}).get("custom") or {}
    return custom.get(LINEAGE_KEY)


def derived_lineage(message: Mapping[str, Any]) -> LineageRecord | None:
    """The record of a message that was itself derived (a summary); None for a message someone said."""
    stamp = message_lineage(message)
    return LineageRecord.from_dict(stamp) if stamp and "derived" in stamp else None


def message_id(message: Mapping[str, Any]) -> str | None:
    """The SDK's durable `tracking_id` of a message (the agent assigns one to every message it adds)."""
    return message.get("tracking_id") or None


def lineage_of_messages(messages: Iterable[Mapping[str, Any]], derived: str, *, user: str | None = None,
                        at: datetime | str | None = None, session_id: str | None = None,
                        **fields: Any) -> LineageRecord:
    """The lineage of something derived from `messages`: their stamps' session and indexes and their tracking ids.

    A message that is itself derived (a summary) passes on its own lineage: what is derived from a summary descends
    from the messages the summary folded, and names the summary among its parents.
    """
    sessions, indexes, ids, parents = [], [], [], []
    for message in messages:
        stamp = message_lineage(message) or {}
        if "derived" in stamp:  # a summary: inherit what it came from
            sessions.append(stamp.get("session_id"))
            indexes += stamp.get("messages") or []
            ids += stamp.get("message_ids") or []
            parents += [p for p in [message_id(message)] if p]
            continue
        if "message_index" in stamp:
            sessions.append(stamp.get("session_id"))
            indexes.append(stamp["message_index"])
        ids += [i for i in [message_id(message) or stamp.get("message_id")] if i]
    known = sorted({s for s in sessions if s is not None})
    if session_id is None and len(known) > 1:
        raise ValueError(f"messages from several sessions {known}: derive from one session at a time")
    record = LineageRecord(derived, session_id or (known[0] if known else None), tuple(indexes), tuple(ids), user,
                           parents=tuple(parents), **fields)
    return record.at_time(at) if at is not None else record


def messages_named(origin: Mapping[str, Any]) -> str:
    """'session ada-selective, messages 58, 59' (or 'messages 3, 4' without a session, 'no message' without any)."""
    indexes = list(origin.get("messages") or [])
    if not indexes:
        return "no message"
    where = f"session {origin['session_id']}, " if origin.get("session_id") else ""
    return f"{where}message{'s' if len(indexes) != 1 else ''} {', '.join(map(str, indexes))}"


def lineage(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """A store record's lineage (`record["metadata"]["lineage"]`), or None."""
    return (record.get("metadata") or {}).get(LINEAGE_KEY)


# ---------------------------------------------------------------------- the hook

# add_memory entries announced by a Lineage hook before the tool runs, by their exact text: the SDK's tool hands each
# entry to `add` unchanged and without metadata, so a store looks its origin up here.
_TOOL_ENTRIES: dict[str, list[dict[str, Any]]] = {}


def announced_tool_lineage(entry: str) -> dict[str, Any] | None:
    """The lineage a `Lineage` hook announced for an add_memory entry that is being written now (None: none).

    The latest announcement: an earlier one whose tool call was refused before it ran may not have been withdrawn.
    """
    announced = _TOOL_ENTRIES.get(entry)
    return dict(announced[-1]) if announced else None


class Lineage:
    """A hook for an Agent: stamps every message it adds with its session and index, so memories can name their source.

    The index is the one the session manager gives the message (its file is `message_<index>.json` in the session's
    agent folder); without a session manager it is the message's position in the agent's history (session_id None).
    Before each `add_memory` call it announces the entries with the messages that led to them (the user's message
    of the turn and the assistant message that asked for the tool), so the store can record them as "tool call".

    A summary that a summarizing conversation manager made without recording its lineage (the SDK's own
    `SummarizingConversationManager`) is stamped before the next model call and at the end of the invocation, before
    the session saves it: it folded every message the manager has removed so far (`removed_message_count`, the
    offset the SDK's session manager restores from), through any earlier summary. (With ``pin_first`` the pinned
    messages are kept, not folded, and this count does not say which they were: the summary then records nothing.)

    Args:
        session_manager: The agent's session manager (its session_id names the session); None without one.
        clock: Where a summary's lineage time comes from (default: the current UTC time).
    """

    def __init__(self, session_manager: Any = None, clock: Callable[[], datetime] | None = None) -> None:
        self.session_manager = session_manager
        self.clock = clock or (lambda: datetime.now(UTC))
        self.next_index = 0
        self.last_user_index: int | None = None
        self._ids: dict[int, str] = {}

    def register_hooks(self, registry: Any, **kwargs: Any) -> None:
        from strands.hooks import (
            AfterInvocationEvent,
            AfterToolCallEvent,
            AgentInitializedEvent,
            BeforeModelCallEvent,
            BeforeToolCallEvent,
            MessageAddedEvent,
        )

        registry.add_callback(AgentInitializedEvent, self._initialized)
        registry.add_callback(MessageAddedEvent, self._stamp)
        registry.add_callback(BeforeToolCallEvent, self._tool_starts)
        registry.add_callback(AfterToolCallEvent, self._tool_ends)
        registry.add_callback(BeforeModelCallEvent, self._summary)
        registry.add_callback(AfterInvocationEvent, self._summary)

    def _summary(self, event: Any) -> None:
        """Stamp a summary the conversation manager made without lineage (see the class docstring)."""
        manager = getattr(event.agent, "conversation_manager", None)
        summary = getattr(manager, "_summary_message", None)  # where the SDK's manager keeps its summary
        if not isinstance(summary, dict) or message_lineage(summary) is not None or getattr(manager, "pin_first", None):
            return
        folded = range(int(getattr(manager, "removed_message_count", 0) or 0))
        user = event.agent.state.get("user_id") if getattr(event.agent, "state", None) is not None else None
        ids = tuple(self._ids[i] for i in folded if i in self._ids)  # all, or none (messages of an earlier process)
        record = LineageRecord("summary", self.session_id, tuple(folded), ids if len(ids) == len(folded) else (),
                               user if isinstance(user, str) else None).at_time(self.clock())
        summary.setdefault("metadata", {}).setdefault("custom", {})[LINEAGE_KEY] = record.to_dict()

    @property
    def session_id(self) -> str | None:
        return getattr(self.session_manager, "session_id", None)

    def _initialized(self, event: Any) -> None:
        """Continue the numbering of a restored session (or of the history the agent starts with)."""
        agent = event.agent
        if self.session_manager is not None:
            self.next_index = len(self.session_manager.list_messages(self.session_id, agent.agent_id))
        else:
            self.next_index = len(agent.messages)

    def _stamp(self, event: Any) -> None:
        message = event.message
        stamp = {"session_id": self.session_id, "message_index": self.next_index}
        if message.get("tracking_id"):  # kept in the stamp too: the SDK's extraction filter copies a message without it
            stamp["message_id"] = self._ids[self.next_index] = message["tracking_id"]
        message.setdefault("metadata", {}).setdefault("custom", {})[LINEAGE_KEY] = stamp
        if message["role"] == "user" and any("text" in block for block in message["content"]):
            self.last_user_index = self.next_index
        self.next_index += 1

    def _tool_starts(self, event: Any) -> None:
        tool_use = event.tool_use
        if tool_use.get("name") != "add_memory":
            return
        asked = sorted({i for i in (self.last_user_index, self.next_index - 1) if i is not None})
        origin = LineageRecord("tool call", self.session_id, tuple(asked), tuple(self._ids[i] for i in asked
                                                                                 if i in self._ids),
                               tool_use_id=tool_use.get("toolUseId")).to_dict()
        for entry in (tool_use.get("input") or {}).get("entries") or []:
            if isinstance(entry, str):
                _TOOL_ENTRIES.setdefault(entry, []).append(origin)

    def _tool_ends(self, event: Any) -> None:
        tool_use = event.tool_use
        if tool_use.get("name") != "add_memory":
            return
        for entry in (tool_use.get("input") or {}).get("entries") or []:
            if not isinstance(entry, str):
                continue
            left = [o for o in _TOOL_ENTRIES.get(entry, []) if o.get("tool_use_id") != tool_use.get("toolUseId")]
            if left:
                _TOOL_ENTRIES[entry] = left
            else:
                _TOOL_ENTRIES.pop(entry, None)


class LineageExtractor:
    """Wraps an extractor (the SDK's `ModelExtractor`, or one wrapping it): each fact it returns carries, in the SDK's
    `ExtractionResult.metadata`, the lineage of the batch of messages it was extracted from."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def extract(self, messages: list[dict[str, Any]], context: Any = None) -> list[Any]:
        results = await self.inner.extract(messages, context)
        origin = lineage_of_messages(messages, "extraction").to_dict()
        for result in results:
            result.metadata = {**(result.metadata or {}), LINEAGE_KEY: dict(origin)}
        return results


# ---------------------------------------------------------------------- agent.state


def write_state(state: Any, key: str, value: Any, origin: LineageRecord) -> None:
    """Set `state[key]` (an `agent.state`, or anything with get/set) and keep its lineage beside it.

    The SDK's `AgentState` is a JSON dict with no place for metadata, so the record goes under the reserved key
    `STATE_LINEAGE_KEY`; both are saved with the session in agent.json.
    """
    if key == STATE_LINEAGE_KEY:
        raise ValueError(f"{STATE_LINEAGE_KEY!r} is the state key that holds lineage; choose another key")
    records = dict(state.get(STATE_LINEAGE_KEY) or {})
    records[key] = origin.to_dict()
    state.set(key, value)
    state.set(STATE_LINEAGE_KEY, records)


def state_lineage(state: Any, key: str) -> LineageRecord | None:
    """The lineage `write_state` kept for `state[key]` (`state` may be an `agent.state` or agent.json's dict)."""
    records = (state.get(STATE_LINEAGE_KEY) if hasattr(state, "get") else None) or {}
    return LineageRecord.from_dict(records[key]) if key in records else None


def manifest_state(state: Any) -> dict[str, Any]:
    """The state to show a model: every entry but the lineage (which, like a message's stamp, is not for the model)."""
    values = state.get() if callable(getattr(state, "get", None)) and not isinstance(state, Mapping) else state
    return {k: v for k, v in (values or {}).items() if k != STATE_LINEAGE_KEY}


# ---------------------------------------------------------------------- markdown


_MD_COMMENT = re.compile(r"\s*<!-- lineage (?P<json>\{.*\}) -->\s*$")


def markdown_line(text: str, origin: Mapping[str, Any] | LineageRecord | None) -> str:
    """A markdown list line for `text`, ending with its lineage as an HTML comment (hidden when rendered).

    The comment keeps how, from which session and messages, and when; not the tracking ids (the session and indexes
    find the message files, which hold them) nor the user (the file is the user's), so a person can read it.
    """
    line = f"- {text}"
    if origin is None:
        return line
    record = origin if isinstance(origin, LineageRecord) else LineageRecord.from_dict(origin)
    data = {k: v for k, v in record.to_dict().items() if k not in ("message_ids", "user")}
    return f"{line} <!-- lineage {json.dumps(data, ensure_ascii=False)} -->"


def read_markdown_lineage(text: str) -> list[tuple[str, LineageRecord | None]]:
    """Each list line of a markdown memory file: its text, and the lineage its comment records (None: no comment)."""
    lines: list[tuple[str, LineageRecord | None]] = []
    for raw in text.splitlines():
        if not raw.startswith("- "):
            continue
        found = _MD_COMMENT.search(raw)
        body = raw[2: found.start()] if found else raw[2:]
        lines.append((body.strip(), LineageRecord.from_dict(json.loads(found["json"])) if found else None))
    return lines
