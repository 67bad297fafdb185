"""What to remember: a memory store that can scope by user, supersede a changed fact, and expire a memory.

`SelectiveMemoryStore` implements the SDK's `strands.memory.MemoryStore` protocol (name, description,
max_search_results, writable, extraction; async `search`, `add` and `add_messages`), so one class serves the three
write policies of notebook 08, which differ only in how the `MemoryManager` is configured:

- dump every message: extraction without an extractor, so the SDK hands raw messages to `add_messages`;
- extraction: extraction with the SDK's `ModelExtractor`, which distils facts and writes each through `add`;
- save immediately: the `add_memory` tool, which the model calls and which also writes through `add`.

All records live in one JSON file (several scoped views may share it); every search is appended to a JSON Lines log
next to it, so a notebook can check what each query returned from the files alone. Time comes from an injected clock.
Every record carries its lineage in its `metadata` (how it was derived, the session and indexes of the messages it came
from, when; what superseded it): a `Lineage` hook on the writing agent stamps the messages, and the store wraps the
extractor so each extracted fact carries the messages of its batch. Also here: the scripted conversation of notebook
08, a model wrapper that records every call, and the memory-map figure (where each kind of memory enters a model call),
drawn from an agent's own objects.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import cycle, islice
from pathlib import Path
from typing import Any

from strands.memory import MemoryEntry
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from companion.memory.lineage import (  # the lineage names notebook 08 and older code import from here
    LINEAGE_KEY as LINEAGE_KEY,
)
from companion.memory.lineage import (
    Lineage as Lineage,
)
from companion.memory.lineage import (
    LineageExtractor,
    LineageRecord,
    announced_tool_lineage,
    lineage,
    lineage_of_messages,
    markdown_line,
    messages_named,
)
from companion.memory.lineage import (
    message_lineage as message_lineage,
)
from companion.models import facts as fact_rules
from companion.models.metering import MeteredModel
from companion.support.conversations import load_script
from companion.support.figures import describe_figure
from companion.support.messages import is_extraction_request, message_text

START = datetime(2026, 1, 5, 9, 0)
"""When every notebook-08 clock starts: a fixed instant, so Run All twice prints the same dates."""

STOPWORDS = frozenset(
    "a an and are as at be can do does for from had has have i in is it its me my of on or our so that the their "
    "them they this to was were what when where which who why will with you your user user's users s".split()
)

_ENTRY = re.compile(r"<entry(?:\s[^>]*)?>(?P<content>.*?)</entry>", re.DOTALL)


def tokens(text: str) -> int:
    """The SDK's own token estimate for text: ceil(characters / 4)."""
    return math.ceil(len(text) / 4)


def words(text: str) -> set[str]:
    """The content words of a text (lower case, stopwords removed): what the keyword search compares."""
    return {w for w in re.findall(r"[a-z0-9][a-z0-9'\-]*", text.lower()) if w not in STOPWORDS}


class Clock:
    """An injected clock: it reads a fixed start time and moves only when told to."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        """Move the clock forward, e.g. `clock.advance(minutes=1)` or `clock.advance(days=8)`."""
        self.now = self.now + timedelta(**delta)
        return self.now


def fact_of(text: str) -> tuple[str, str] | None:
    """The (key, value) a memory states, read with the offline model's rules; None for text that states no fact."""
    found = fact_rules.statements(text)
    return (found[-1].key, found[-1].value) if found else None


class SelectiveMemoryStore:
    """A Strands memory store in one JSON file, with a user scope, superseding updates and expiry.

    Args:
        path: The JSON file holding every record (created when missing). Views of several users may share it.
        name: The store's name in `MemoryManager` tools and injected `<entry source=...>` attributes.
        user: The scope. Searches see only this user's records and writes are stamped with it; None sees everyone.
        supersede: When True, a write that states a fact already held for the same user with another value ends the
            old record (its `valid_until` is now, `superseded_by` the new id) instead of keeping both; the same fact
            twice is stored once. When False every write is a new record, as a plain store does.
        clock: Where time comes from (a `Clock`); default: a clock fixed at `START`.
        ttl: A time to live given to every record written through this view (None: no expiry).
        extraction: The SDK's extraction setting for this store (see `strands.memory.ExtractionConfig`).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        name: str = "memories",
        user: str | None = None,
        supersede: bool = False,
        clock: Callable[[], datetime] | None = None,
        ttl: timedelta | None = None,
        extraction: Any = None,
        max_search_results: int = 5,
        description: str = "Facts about the user.",
    ) -> None:
        self.path = Path(path)
        self.log_path = self.path.with_suffix(".searches.jsonl")
        self.name = name
        self.description = description
        self.max_search_results = max_search_results
        self.writable = True
        self.extraction = extraction
        self.user = user
        self.supersede = supersede
        self.clock = clock or Clock()
        self.ttl = ttl
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._save([])

    @property
    def extraction(self) -> Any:
        """The SDK's extraction setting; an extractor given here (now or later) is wrapped in `LineageExtractor`."""
        return self._extraction

    @extraction.setter
    def extraction(self, extraction: Any) -> None:
        if isinstance(extraction, dict) and extraction.get("extractor") is not None \
                and not isinstance(extraction["extractor"], LineageExtractor):
            extraction = {**extraction, "extractor": LineageExtractor(extraction["extractor"])}
        self._extraction = extraction

    def view(self, **changes: Any) -> SelectiveMemoryStore:
        """Another view on the same file: same name, user, rules and clock unless changed; no extraction unless given."""
        settings = {"name": self.name, "user": self.user, "supersede": self.supersede, "clock": self.clock,
                    "ttl": self.ttl, "extraction": None, "max_search_results": self.max_search_results,
                    "description": self.description}
        settings.update(changes)
        return SelectiveMemoryStore(self.path, **settings)

    # ------------------------------------------------------------------ the file

    def _load(self) -> list[dict[str, Any]]:
        return json.loads(self.path.read_text(encoding="utf-8"))

    def _save(self, records: list[dict[str, Any]]) -> None:
        self.path.write_text(json.dumps(records, indent=1, ensure_ascii=False), encoding="utf-8")

    def _live(self, record: dict[str, Any], at: datetime) -> bool:
        """Whether a record is current at `at`: written by then and not yet ended (superseded or expired)."""
        start = datetime.fromisoformat(record["written_at"])
        end = record.get("valid_until")
        return start <= at and (end is None or at < datetime.fromisoformat(end))

    def records(self, *, everyone: bool = False, at: datetime | None = None, history: bool = False) -> list[dict[str, Any]]:
        """The records of this view's user (or everyone's): current ones at `at` (default now), or with history=True
        only the ended ones (superseded or expired)."""
        at = at or self.clock()
        mine = [r for r in self._load() if everyone or self.user is None or r["user"] == self.user]
        if history:
            return [r for r in mine if not self._live(r, at) and datetime.fromisoformat(r["written_at"]) <= at]
        return [r for r in mine if self._live(r, at)]

    def write(self, content: str, metadata: dict[str, Any] | None = None, source: str = "add") -> str:
        """Store one memory now and return its id (the synchronous twin of `add`).

        The record's `metadata["lineage"]` says where it came from: the one given in `metadata` (how it was derived,
        the session and the indexes of the messages), else a "direct write" by code; and when ("at"). A record this
        write supersedes gets `lineage["replaced_by"]` (the new id and the messages it came from); the same fact
        written again adds its origin to the kept record's `lineage["restated_in"]`.
        """
        content = re.sub(r"\s+", " ", content).strip()
        if not content:
            raise ValueError("A memory must contain some text; got an empty one.")
        metadata = dict(metadata or {})
        now = self.clock()
        given = metadata.pop(LINEAGE_KEY, None) or LineageRecord("direct write").to_dict()
        origin = LineageRecord.from_dict({"user": self.user, **given}).at_time(now).to_dict()
        origin.update({k: v for k, v in given.items() if k not in origin and k != "at"})  # e.g. a caller's own keys
        records = self._load()
        new_id = f"m{len(records) + 1:03d}"
        fact = fact_of(content)
        replaces = None
        if self.supersede and fact is not None:
            for record in records:
                if record["user"] != self.user or not self._live(record, now) or record.get("key") != fact[0]:
                    continue
                if record.get("value") == fact[1]:  # the same fact again: keep the one record, note where it recurred
                    _lineage_of(record).setdefault("restated_in", []).append(origin)
                    self._save(records)
                    return record["id"]
                record["valid_until"] = now.isoformat()
                record["superseded_by"] = new_id
                _lineage_of(record)["replaced_by"] = {"id": new_id, **origin}
                replaces = replaces or record.get("replaces") or record["id"]
        valid_until = metadata.pop("valid_until", None)
        if valid_until is None and self.ttl is not None:
            valid_until = (now + self.ttl).isoformat()
        records.append(
            {
                "id": new_id,
                "user": self.user,
                "content": content,
                "key": fact[0] if fact else None,
                "value": fact[1] if fact else None,
                "source": source,
                "written_at": now.isoformat(),
                "valid_until": valid_until,
                "superseded_by": None,
                "replaces": replaces,
                "metadata": {**metadata, LINEAGE_KEY: origin},
            }
        )
        self._save(records)
        return new_id

    def find(self, query: str, k: int | None = None) -> list[dict[str, Any]]:
        """Current records sharing content words with the query, most shared words first, older first on a tie.

        Every call is appended to the search log with the view's user and the ids and users it returned.
        """
        k = k or self.max_search_results
        asked = words(query)
        scored = [(len(asked & words(r["content"])), r) for r in self.records()]
        hits = [r for score, r in sorted(scored, key=lambda pair: -pair[0]) if score > 0][:k]
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(json.dumps({"store": self.name, "scope": self.user, "query": query,
                                  "returned": [[r["id"], r["user"]] for r in hits]}) + "\n")
        return hits

    # ------------------------------------------------------------------ the MemoryStore protocol

    async def search(self, query: str, options: dict[str, Any] | None = None) -> list[MemoryEntry]:
        """The SDK's search (injection and the search tool)."""
        k = (options or {}).get("max_search_results") or self.max_search_results
        return [MemoryEntry(content=r["content"], metadata={"id": r["id"]}) for r in self.find(query, k)]

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """The SDK's add: the add_memory tool and ModelExtractor's results arrive here.

        An extracted fact brings its lineage in `metadata` (see `LineageExtractor`); an add_memory entry finds the one
        a `Lineage` hook announced for it; anything else is recorded as derived by "add", from unknown messages.
        """
        metadata = dict(metadata or {})
        if LINEAGE_KEY not in metadata:
            metadata[LINEAGE_KEY] = announced_tool_lineage(content) or LineageRecord("add").to_dict()
        return self.write(content, metadata, source="add")

    async def add_messages(self, messages: list[dict[str, Any]], context: Any = None) -> list[str]:
        """The SDK's add_messages: extraction without an extractor hands raw messages here; each becomes a memory."""
        return [self.write(text, {LINEAGE_KEY: lineage_of_messages([m], "dump").to_dict()}, source="add_messages")
                for m in messages if (text := message_text(m).strip())]


def _lineage_of(record: dict[str, Any]) -> dict[str, Any]:
    """A record's lineage, created (as a direct write) for a record written before lineage existed."""
    metadata = record.setdefault("metadata", {})
    return metadata.setdefault(LINEAGE_KEY, LineageRecord("direct write").to_dict())


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record in a store file, read straight from disk (for checks independent of the store object)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_searches(path: str | Path) -> list[dict[str, Any]]:
    """Every search logged next to a store file."""
    log = Path(path).with_suffix(".searches.jsonl")
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


# ---------------------------------------------------------------------- the script


@dataclass(frozen=True)
class Script:
    """Notebook 08's conversation: the user's turns, the other user's turns, and the questions with their answers."""

    turns: list[str]
    other_turns: list[str]
    questions: dict[str, str]
    expected: dict[str, str]
    history: dict[str, list[str]]
    fact_turns: list[int] = field(default_factory=list)  # the 1-based turns that state a fact (the rest is chatter)


def selective_script(turns: int, name: str = "selective_chat") -> Script:
    """The first user's `turns` turns: the fact turns in order, spread evenly, with chatter in between."""
    script = load_script(name)
    said = [f["say"] for f in script["facts"]]
    if not isinstance(turns, int) or turns < len(said):
        raise ValueError(f"The {name!r} script has {len(said)} fact turns, so it needs at least that many turns; got {turns!r}.")
    chatter = list(islice(cycle(script["chatter"]), turns - len(said)))
    slots = {round(i * (turns - 1) / max(len(said) - 1, 1)) for i in range(len(said))}
    slots = sorted(slots)
    lines, fact_iter, chat_iter = [], iter(said), iter(chatter)
    for turn in range(turns):
        lines.append(next(fact_iter) if turn in slots else next(chat_iter))
    expected: dict[str, str] = {}
    history: dict[str, list[str]] = {}
    for fact in script["facts"]:
        if fact["key"]:
            expected[fact["key"]] = fact["value"]
            history.setdefault(fact["key"], []).append(fact["value"])
    return Script(lines, list(script["other_user"]), dict(script["questions"]), expected, history, [slot + 1 for slot in slots])


# ---------------------------------------------------------------------- measuring at the model


class RecordingModel(MeteredModel):
    """A `MeteredModel` that also keeps every call: its kind, the messages it received and the text it answered.

    kind is "extraction" for the SDK's ModelExtractor requests, "summary" for summarization, else "turn".
    """

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.log: list[dict[str, Any]] = []

    async def stream(
        self, messages: Messages, tool_specs: list[ToolSpec] | None = None, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncIterable[StreamEvent]:
        last_user = next((m for m in reversed(messages) if m["role"] == "user"), None)
        call = {"kind": "extraction" if is_extraction_request(last_user) else "turn", "messages": messages, "reply": ""}
        self.log.append(call)
        async for event in super().stream(messages, tool_specs, system_prompt, **kwargs):
            delta = event.get("contentBlockDelta", {}).get("delta", {})
            call["reply"] += delta.get("text", "")
            yield event


def call_for(recorder: RecordingModel, question: str) -> dict[str, Any]:
    """The first recorded turn call whose last user message begins with `question`."""
    for call in recorder.log:
        last_user = next((m for m in reversed(call["messages"]) if m["role"] == "user"), None)
        if call["kind"] == "turn" and last_user is not None and message_text(last_user).startswith(question):
            return call
    raise LookupError(f"No recorded call asked {question!r}.")


def extraction_for(recorder: RecordingModel, line: str) -> dict[str, Any]:
    """The first recorded extraction call whose transcript holds the user line `line`."""
    for call in recorder.log:
        if call["kind"] == "extraction" and f"user: {line}" in message_text(call["messages"][-1]):
            return call
    raise LookupError(f"No recorded extraction call read {line!r}.")


def injected_entries(messages: Messages) -> list[str]:
    """The memory entries injected into a call: the `<entry>` texts in its last user message."""
    last_user = next((m for m in reversed(messages) if m["role"] == "user"), None)
    if last_user is None:
        return []
    return [html.unescape(m.group("content")).strip() for b in last_user["content"] if "text" in b
            for m in _ENTRY.finditer(b["text"])]


def injected_tokens(messages: Messages) -> int:
    """Tokens of the `<memory>` block injected into a call (0 when none was)."""
    last_user = next((m for m in reversed(messages) if m["role"] == "user"), None)
    if last_user is None:
        return 0
    return sum(tokens(b["text"]) for b in last_user["content"] if "text" in b and b["text"].lstrip().startswith("<memory>"))


def contradictions(entries: Sequence[str]) -> dict[str, set[str]]:
    """Keys that the given memory entries state with more than one value, e.g. {"programming language": {Python, Go}}."""
    values: dict[str, set[str]] = {}
    for entry in entries:
        fact = fact_of(entry)
        if fact:
            values.setdefault(fact[0], set()).add(fact[1].lower())
    return {key: vals for key, vals in values.items() if len(vals) > 1}


# ---------------------------------------------------------------------- markdown files


def as_markdown(user: str, records: Sequence[dict[str, Any]], *, with_lineage: bool = True) -> str:
    """A user's current memories as a markdown file a person can read and edit.

    A memory that superseded another takes the line of the first one it replaced, so an update shows as one changed line.
    Each line ends with its lineage in an HTML comment (hidden when rendered; `read_markdown_lineage` reads it back), so
    the file names the messages behind every fact, as the store does.
    """
    ordered = sorted(records, key=lambda r: r.get("replaces") or r["id"])
    lines = [markdown_line(r["content"], lineage(r) if with_lineage else None) for r in ordered]
    return "\n".join([f"# Facts about {user}", *lines]) + "\n"


def history_markdown(user: str, records: Sequence[dict[str, Any]], *, with_lineage: bool = True) -> str:
    """A user's ended memories, with when and why each ended (and the messages that replaced it), each line ending
    with the ended memory's own lineage, as in `as_markdown`."""
    lines = [f"# History of {user}"]
    for r in records:
        why = f"superseded by {r['superseded_by']}" if r.get("superseded_by") else "expired"
        replaced = (lineage(r) or {}).get("replaced_by") or {}
        if replaced.get("messages"):
            why += f" from {messages_named(replaced)}"
        text = f"{r['content']} (from {r['written_at']} until {r['valid_until']}, {why})"
        lines.append(markdown_line(text, lineage(r) if with_lineage else None))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the map


def _box(ax: Any, xy: tuple[float, float], size: tuple[float, float], title: str, body: str, color: str) -> None:
    from matplotlib.patches import FancyBboxPatch

    x, y = xy
    w, h = size
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.01,rounding_size=0.02", fc=color, ec="#333333", lw=1.5))
    ax.text(x + w / 2, y + h - 0.035, title, ha="center", va="top", fontsize=12.5, fontweight="bold")
    ax.text(x + w / 2, y + h - 0.10, body, ha="center", va="top", fontsize=10.5, linespacing=1.45)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def memory_map(agent: Any, call_messages: Messages, *, session_manager: Any = None, title: str | None = None) -> Any:
    """Where each kind of memory enters a model call, labelled from the agent's own objects.

    Working memory: the messages of `call_messages` (one recorded call). Short-term: the session manager's message log
    and the conversation manager's window. Long-term: the memory manager's stores and the entries injected into that
    call. Durable state: the keys of `agent.state`, the keys the session manager reads back from its storage for this
    agent, and those of them whose name occurs in the call's messages; drawn with a dashed arrow (it reaches the model
    only if a hook injects it). Returns a matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    manager = agent.conversation_manager
    window = getattr(manager, "window_size", None)
    stored = "no session manager: nothing stored"
    if session_manager is not None:
        count = len(session_manager.list_messages(session_manager.session_id, agent.agent_id))
        stored = f"{type(session_manager).__name__}: {_plural(count, 'message')} stored"
    short = f"{stored}\n{type(manager).__name__}" + (f"(window_size={window})" if window is not None else "")
    short += f"\n{_plural(len(agent.messages), 'message')} kept in agent.messages"

    memory = getattr(agent, "memory_manager", None)
    if memory is not None:
        stores = getattr(memory, "_stores", [])
        names = "\n".join(f"{type(s).__name__} '{s.name}'" + (f": {_plural(len(s.records()), 'memory')}".replace("memorys", "memories")
                                                               if hasattr(s, "records") else "") for s in stores)
        entries = len(injected_entries(call_messages))
        long = f"{type(memory).__name__} over\n{names}\n{_plural(entries, 'entry').replace('entrys', 'entries')} injected into this call"
    else:
        long = "no memory manager"

    state = agent.state.get() or {}
    durable = "agent.state keys: " + (", ".join(sorted(state)) or "none")
    if session_manager is not None:  # what the session's storage holds for this agent, read back from it
        saved = session_manager.read_agent(session_manager.session_id, agent.agent_id)
        saved_keys = sorted((saved.state if saved is not None else None) or {})
        durable += f"\nread back from the session: {', '.join(saved_keys) or 'none'}"
    else:
        durable += "\nno session manager: not saved"
    call_text = json.dumps(call_messages, ensure_ascii=False, default=str)
    sent = sorted(key for key in state if key in call_text)
    durable += f"\nkeys found in this call: {', '.join(sent) or 'none'}"
    text = sum(tokens(message_text(m)) for m in call_messages)
    working = f"{_plural(len(call_messages), 'message')} in this call\n~{text} tokens of text"
    model = agent.model
    inner = getattr(model, "inner", None)
    model_name = type(model).__name__ + (f"\nwrapping {type(inner).__name__}" if inner is not None else "")

    with plt.rc_context({"font.size": 11}):
        fig, ax = plt.subplots(figsize=(13, 5.6))
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
        _box(ax, (0.39, 0.38), (0.22, 0.24), "model call", model_name, "#fde9b6")
        size = (0.35, 0.28)
        boxes = [
            ((0.02, 0.68), "working memory", working, "#d9ecff", (0.39, 0.56), "-"),
            ((0.63, 0.68), "short-term memory", short, "#dff5dd", (0.61, 0.56), "-"),
            ((0.02, 0.02), "long-term memory", long, "#f5e1f7", (0.39, 0.44), "-"),
            ((0.63, 0.02), "durable state", durable, "#eeeeee", (0.61, 0.44), "--"),
        ]
        for (x, y), head, body, color, target, style in boxes:
            _box(ax, (x, y), size, head, body, color)
            start = (x + size[0] / 2, y - 0.012 if y > 0.5 else y + size[1] + 0.012)
            ax.annotate("", xy=target, xytext=start,
                        arrowprops={"arrowstyle": "-|>", "lw": 2, "color": "#555555", "linestyle": style, "shrinkA": 0})
        ax.set_title(title or "Where each kind of memory enters a model call", fontsize=15)
        fig.tight_layout()

    def line(body: str) -> str:
        return ", ".join(body.split("\n"))

    heading = title or "Where each kind of memory enters a model call"
    return describe_figure(fig, f"Diagram titled '{heading}': one model call ({' '.join(model_name.split())}) with four "
                                f"kinds of memory pointing into it: working memory, {line(working)}; short-term memory, {line(short)}; "
                                f"long-term memory, {line(long)}; durable state, on a dashed arrow, {line(durable)}.")


def policy_plot(rows: Sequence[dict[str, Any]], metrics: Sequence[str], title: str) -> Any:
    """One small bar chart per metric, one bar per policy (rows hold "policy" and each metric)."""
    import matplotlib.pyplot as plt

    colors = ["#8c8c8c", "#3a7bd5", "#e07b39", "#4caf50", "#9c27b0"]
    with plt.rc_context({"font.size": 12}):
        fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 4.2))
        for ax, metric in zip(axes, metrics):
            names = [r["policy"] for r in rows]
            values = [r[metric] for r in rows]
            bars = ax.bar(range(len(rows)), values, color=colors[: len(rows)])
            labels = [f"{v:.2f}" if isinstance(v, float) and v <= 1 else f"{v:g}" for v in values]
            ax.bar_label(bars, labels=labels, padding=2)
            ax.set_xticks(range(len(rows)), [n.replace(" ", "\n", 1) for n in names], fontsize=10)
            ax.set_title(metric, fontsize=13)
            ax.margins(y=0.18)
            ax.grid(axis="y", alpha=0.3)
        fig.suptitle(title, fontsize=15)
        fig.tight_layout()

    def shown(value: Any) -> str:
        return f"{value:.2f}" if isinstance(value, float) and value <= 1 else f"{value:g}"

    parts = "; ".join(f"{metric}: " + ", ".join(f"{r['policy']} {shown(r[metric])}" for r in rows) for metric in metrics)
    return describe_figure(fig, f"{len(metrics)} bar charts, one per measure, one bar per policy: {parts}.")


# ---------------------------------------------------------------------- notebook 08's lesson helpers


def says(text: str, value: str) -> bool:
    """Whether `text` holds `value` as a word of its own, in any case: "Go" is not in "Good question"."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE) is not None


def injected_for(model: MeteredModel, question: str) -> list[str]:
    """The memory entries injected into the call of `model` (a `MeteredModel`) whose last user message asked
    `question`: what that call received, read from the wrapper's `exchanges`."""
    for exchange in model.exchanges:
        last_user = next((m for m in reversed(exchange["messages"]) if m["role"] == "user"), None)
        if last_user is not None and message_text(last_user).startswith(question):
            return injected_entries(exchange["messages"])
    raise LookupError(f"No call of this model asked {question!r}.")


def named_messages(storage_dir: str | Path, origin: dict[str, Any]) -> dict[int, str]:
    """The texts of the messages a lineage names, read from its session's `message_<index>.json` files (the layout
    `FileSessionManager` writes; read here with `json`, as the memory layer does not import the sessions layer)."""
    folder = Path(storage_dir) / f"session_{origin['session_id']}" / "agents" / "agent_default" / "messages"
    return {i: message_text(json.loads((folder / f"message_{i}.json").read_text(encoding="utf-8"))["message"])
            for i in origin["messages"]}


def extraction_reply(model: MeteredModel, line: str) -> str:
    """What the extraction call of `model` (a `MeteredModel`) that read the user line `line` answered."""
    for exchange in model.exchanges:
        last = exchange["messages"][-1] if exchange["messages"] else None
        if last is not None and is_extraction_request(last) and f"user: {line}" in message_text(last):
            return exchange["reply"]
    raise LookupError(f"No extraction call of this model read {line!r}.")
