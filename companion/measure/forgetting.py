"""Forgetting on purpose: remove one fact of one user from every store notebook 09 writes, and nothing else.

`forget(stores, key, user=...)` follows lineage (issue 18). It reads the user's session messages (and summaries) with
the offline model's reader (`companion.models.facts`) and takes as *sources* the messages that state the key, e.g.
"My home address is 12 Harbour Lane." and the reply "Noted: your home address is 12 Harbour Lane.". Then every
artifact that records a source among the messages it came from (its lineage, `companion.memory.lineage`) goes, or is
derived again from what is left; an artifact whose lineage names only other messages is not touched, whatever its
words ("My favourite pub is the Harbour Inn." stays when the home address on Harbour Lane goes):

- session message files (`FileSessionManager`): the sources' sentences that state the fact are cut out of each
  message's text, in place, so every `message_<N>.json` keeps its number and role and the session stays restorable
  (deleting a file would shift the SDK's `removed_message_count` offset by one message);
- the summary (`SummarizingConversationManager`'s `summary_message` in agent.json): derived from the messages it folded
  (its own lineage record when it has one, else the first `removed_message_count` messages); when a source is among
  them, or the summary itself states the key, it is re-written by the model from the folded messages (the sources among them redacted)
  (`summarizer=`), or with the sentences cut out when no model is given;
- `agent.state`: each entry whose lineage (`state["lineage"][path]`, path "profile/home address" for a nested one)
  names a source is removed, with its record;
- the vector store file (`SqliteVecMemoryStore`, shared by users): a row records a lineage for each time its text was
  derived (`lineage`, then `restated_in`), each naming its user, so a text two users both said is one row of both.
  The user's lineages that name a source are taken off the row; a row with no lineage left is deleted from the table,
  the sqlite-vec index and the FTS5 index with `PRAGMA secure_delete = ON`, and a row another user derived too stays,
  with only that user's lineage (the first one left becomes the row's user and lineage). The FTS5 index is merged
  ('optimize') so no segment keeps the deleted terms, and the file is rebuilt with VACUUM so no free page keeps old
  bytes (the report reads `PRAGMA freelist_count` after it);
- markdown files (`LineageFileMemoryStore`, `memory/<user>/`, lineage in an HTML comment on each line): the lines that
  descend from a source are removed; a file left with no line is deleted, and a file named after a removed line is
  renamed.

An artifact that records no lineage (written by older code), or a lineage that names no message (derived by "add":
its messages unknown; a "direct write" by code), is judged by its text instead: it goes when it states the key or
holds one of the values the sources state, whole (word boundaries, any case), outside the values of other facts.
`by="text"` judges everything that way, whatever its lineage: the matching notebook 09 compares lineage with, which
misses a memory worded another way ("Lives on Harbour Lane, no. 12.").

Everything is planned before anything changes (`ForgetReport.plan`); the plan is written to `.forget-plan.json` under
the stores' folder (the user, the key, the source messages and the steps; no value, no file name that could spell
one), then applied step by step in this order: the database rows are deleted and committed, the database file is
rebuilt (VACUUM), the derived files are replaced or deleted one by one, and the sources' own message files come last.
A failure at any step raises `PartialForget`, naming what was done and what is left; running forget() again reads the
plan's sources and the stores again and finishes (then deletes the plan file). A forget killed outright (SIGKILL)
can leave the new copy of a file it was replacing (`.forget_*.tmp`, which may hold the text being redacted): every
forget() removes such leftovers from the stores' folders before it reads them.
`observe(what, path)`, if given, is called with each transient file while it still exists (the plan file once
written, the database's rollback journal just before the commit, the database file just before VACUUM, each new
file's temporary copy just before its rename, each old file just before it is replaced or deleted), so a caller can
scan bytes that are gone from the folder once forget() returns.

The store's SQLite library (`sqlean` here) cannot see a lock that this same process holds through another copy of
SQLite (the standard `sqlite3`): forget() reads the kernel's lock table first and refuses, naming the holder.

`user=None` forgets the key for every user: the mistake of a delete without a scope, kept for notebook 09's exercise.
Before anything changes, every store is checked (present, readable, the database lock taken): a missing or locked
store, an unknown user or a fact that is not stored raises a `ForgetError` and nothing is changed.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from companion.measure.byte_scan import slug
from companion.memory.lineage import LINEAGE_KEY, STATE_LINEAGE_KEY, read_markdown_lineage
from companion.memory.lineage_markdown import without_lineage
from companion.memory.vector_store import connect, lock_holders, locks_of_this_process, row_lineages, row_users
from companion.models import facts
from companion.sessions.session_files import CorruptSessionError, read_json
from companion.support.messages import SUMMARY_REQUEST, message_text
from companion.support.parameters import shown

FORGOTTEN = "[forgotten at the user's request]"
"""What a message's text becomes when every sentence in it stated the forgotten fact."""


class ForgetError(RuntimeError):
    """forget() refused; nothing in any store was changed."""


class NothingToForgetError(ForgetError):
    """No store holds the fact for that user."""


class UnknownUserError(ForgetError):
    """No store holds anything of that user."""


class StoreUnavailableError(ForgetError):
    """A store file or folder is missing, damaged or locked by another connection."""


@dataclass(frozen=True)
class Stores:
    """Where notebook 09's stores live: a FileSessionManager storage_dir, one SqliteVecMemoryStore file shared by all
    users, and the LocalFileStorage base_dir under which each user's FileMemoryStore keeps memory/<user>/*.md."""

    sessions: Path
    vectors: Path
    markdown: Path

    @classmethod
    def under(cls, root: str | os.PathLike) -> Stores:
        root = Path(root)
        return cls(root / "sessions", root / "memory.db", root / "files")

    @property
    def root(self) -> Path:
        return Path(os.path.commonpath([self.sessions, self.vectors, self.markdown]))

    def show(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    @property
    def plan_file(self) -> Path:
        """Where forget() keeps its plan while it runs (the user, the key, the source messages; no value)."""
        return self.root / ".forget-plan.json"


@dataclass(frozen=True)
class Change:
    """One thing forget() changed."""

    store: str
    file: str
    what: str


@dataclass
class ForgetReport:
    """What forget() found and changed: `plan` is every change, decided before the first one; `changes` the ones
    done (all of them when forget() returns)."""

    user: str | None
    key: str
    values: list[str]
    changes: list[Change] = field(default_factory=list)
    plan: list[Change] = field(default_factory=list)
    by: str = "lineage"
    sources: list[tuple[str, int]] = field(default_factory=list)

    def rows(self) -> list[dict[str, str]]:
        return [{"store": c.store, "file": c.file, "what changed": c.what} for c in self.changes]


class PartialForget(RuntimeError):
    """forget() failed part way through its plan: some changes are done, the rest are not. Running forget() again
    finishes the job (it reads the stores again and plans what is left). `done` and `left` list the changes;
    `report` is the report so far; the error that stopped it is the exception's cause."""

    def __init__(self, report: ForgetReport, failed: Change, error: BaseException, left: list[Change]):
        self.report, self.failed, self.done, self.left = report, failed, list(report.changes), left

        def listed(changes: list[Change]) -> str:
            return "; ".join(f"{c.file}: {c.what}" for c in changes) or "nothing"

        super().__init__(
            f"forget() stopped part way: {failed.file} ({failed.what}) failed with {type(error).__name__}: {error}. "
            f"Done: {listed(self.done)}. Left: {listed(left)}. Run forget() again to finish: it reads the stores "
            "again and does what is left."
        )


@dataclass
class _Step:
    """One change of the plan: what it does (for the report) and how."""

    changes: list[Change]
    run: Callable[[], None]


def _apply(step: _Step) -> None:
    """Carry out one step of the plan (tests replace this to inject a failure at any step)."""
    step.run()


# ---------------------------------------------------------------------- reading the fact out of text


def _same_key(a: str, b: str) -> bool:
    return facts.normalise_key(a) == facts.normalise_key(b)


def stated_values(text: str, key: str) -> list[str]:
    """The values `text` states for `key`, read with the offline model's rules (companion.models.facts)."""
    return [f.value for f in facts.statements(text) if _same_key(f.key, key)]


def mentions(text: str, key: str, values: list[str]) -> bool:
    """Whether a text states the fact: a statement of `key` (read with the offline model's rules), or one of the
    values as a whole (word boundaries, any case) outside the values of the other facts the text states.

    "My favourite pub is the Harbour Inn." states the favourite pub, so it does not mention a home address "The
    Harbour" although the words are there; "I live at the harbour now!" (no statement read) does."""
    found = facts.statements(text)
    if any(_same_key(f.key, key) for f in found):
        return True
    for other in found:  # another fact's value belongs to that fact, even when it holds this one's words
        text = re.sub(re.escape(other.value), " ", text, flags=re.IGNORECASE)
    return any(re.search(rf"(?<!\w){re.escape(v)}(?!\w)", text, re.IGNORECASE) for v in values if v.strip())


def _entry_states(name: str, item: Any, key: str, values: list[str]) -> bool:
    """Whether a state entry states the fact: it is named like the key, or its text is one of the values (whole) or
    a statement of the key. An entry named for another fact keeps its value ("favorite pub": "the Harbour Inn")."""
    if _same_key(name, key):
        return True
    if not isinstance(item, str):
        return False
    return item.strip().lower() in {v.strip().lower() for v in values} or bool(stated_values(item, key))


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+")


def redact_text(text: str, key: str, values: list[str]) -> str:
    """The text without the sentences that state the key or contain a value; `FORGOTTEN` if nothing is left."""
    kept_lines = []
    for line in text.split("\n"):
        sentences = _SENTENCE_SPLIT.split(line)
        kept = [s for s in sentences if not mentions(s, key, values)]
        if len(kept) == len(sentences):
            kept_lines.append(line)
        elif any(s.strip() for s in kept):
            kept_lines.append(" ".join(kept))
    result = "\n".join(kept_lines)
    return result if result.strip() else FORGOTTEN


def _redact_json(data: Any, key: str, values: list[str], *, drop_entries: bool) -> Any:
    """A copy of JSON data with every string redacted; with drop_entries, dict entries named like the key or holding
    a value are removed instead (agent.state)."""
    if isinstance(data, dict):
        out = {}
        for name, item in data.items():
            if drop_entries and _entry_states(str(name), item, key, values):
                continue
            if drop_entries and isinstance(item, str):
                out[name] = item  # a string entry named for another fact: that fact's value (see _entry_states)
                continue
            out[name] = _redact_json(item, key, values, drop_entries=drop_entries)
        return out
    if isinstance(data, list):
        return [_redact_json(item, key, values, drop_entries=drop_entries) for item in data]
    if isinstance(data, str) and mentions(data, key, values):
        return redact_text(data, key, values)
    return data


def _strings(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in [str(k), *_strings(v)]]
    if isinstance(data, list):
        return [s for item in data for s in _strings(item)]
    return [data] if isinstance(data, str) else []


def _state_values(state: Any, key: str) -> list[str]:
    if isinstance(state, dict):
        found = [str(v) for k, v in state.items() if _same_key(str(k), key) and isinstance(v, (str, int, float))]
        return found + [v for item in state.values() for v in _state_values(item, key)]
    if isinstance(state, list):
        return [v for item in state for v in _state_values(item, key)]
    return []


# ---------------------------------------------------------------------- the stores


def _check_present(stores: Stores) -> None:
    for label, path, kind in [("session folder", stores.sessions, "dir"), ("vector store file", stores.vectors, "file"),
                              ("markdown folder", stores.markdown, "dir")]:
        if path.is_dir() if kind == "dir" else path.is_file():
            continue
        wrong = f" (it is not a {'folder' if kind == 'dir' else 'file'})" if path.exists() else ""
        raise StoreUnavailableError(
            f"The {label} {path} is missing{wrong}. Nothing was changed: forget() works on all the stores at once or "
            "on none. Restore it (or point Stores at the right place) and run forget() again."
        )


def _agent_files(stores: Stores) -> list[Path]:
    return sorted(stores.sessions.glob("session_*/agents/agent_*/agent.json"))


def _message_files(agent_json: Path) -> list[Path]:
    folder = agent_json.parent / "messages"
    files = [p for p in folder.glob("message_*.json") if re.fullmatch(r"message_\d+\.json", p.name)]
    return sorted(files, key=lambda p: int(p.stem.split("_")[1]))


def _read(path: Path) -> dict[str, Any]:
    try:
        return read_json(path)
    except CorruptSessionError as error:
        raise StoreUnavailableError(f"{error} forget() changed nothing.") from None


def _vector_rows(stores: Stores, busy_timeout: float) -> list[tuple[int, str, list[str], dict[str, Any]]]:
    """(id, content, users, metadata) of every row of the vector store; `users` are all the users the row belongs to
    (`row_users`: a text two users both said is one row, theirs both)."""
    db, module = connect(stores.vectors, timeout=busy_timeout)
    try:
        rows = db.execute("SELECT id, content, metadata FROM memories").fetchall()
    except module.DatabaseError as error:
        raise _db_failure(stores, error, module) from None
    finally:
        db.close()
    metadata = [(i, c, json.loads(m or "{}")) for i, c, m in rows]
    return [(i, c, row_users(meta), meta) for i, c, meta in metadata]


def _db_failure(stores: Stores, error: Exception, module: Any) -> StoreUnavailableError:
    text = str(error)
    if "locked" in text or "busy" in text:
        holder = lock_holders(stores.vectors) or "another connection"
        return StoreUnavailableError(
            f"The vector store {stores.vectors} is locked by {holder} ({text}). Nothing was changed in any store: "
            "let that writer finish (close its store or stop its process), then run forget() again."
        )
    return StoreUnavailableError(f"The vector store {stores.vectors} cannot be read as a memory store ({text}). "
                                 "Nothing was changed in any store.")


def _no_lock_of_this_process(stores: Stores, busy_timeout: float) -> None:
    """Wait up to busy_timeout for every lock this process holds on the database to go; refuse if one stays."""
    deadline = time.monotonic() + busy_timeout
    while held := locks_of_this_process(stores.vectors):
        if time.monotonic() >= deadline:
            raise StoreUnavailableError(
                f"The vector store {stores.vectors} is locked by {held}. That lock was taken through another copy of "
                "SQLite than the store's (for example the standard sqlite3 module; the store uses "
                f"{_library_name()}), which cannot see it, so forget() refuses rather than "
                "write under it. Nothing was changed in any store: commit or close that connection (or finish the "
                "transaction), then run forget() again."
            )
        time.sleep(0.05)


def _library_name() -> str:
    from companion.memory.vector_store import _sqlite_module

    module = _sqlite_module()
    return f"{module.__name__} (SQLite {module.sqlite_version})"


def known_users(stores: Stores, busy_timeout: float = 1.0) -> list[str]:
    """Every user any store holds something of: agent.state's user_id, the vector rows' metadata, memory/<user>/."""
    _check_present(stores)
    found = {str(_read(p).get("state", {}).get("user_id")) for p in _agent_files(stores)} - {"None"}
    found |= {u for _, _, named, _ in _vector_rows(stores, busy_timeout) for u in named}
    memory = stores.markdown / "memory"
    found |= {p.name for p in memory.iterdir() if p.is_dir()} if memory.is_dir() else set()
    return sorted(found)


def _summarize(summarizer: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A new summary of `messages` from the model, asked as the SDK's summarizing manager asks (its system prompt and
    "Please summarize this conversation."), returned as the user-role message the manager stores. When the folded
    messages end with a user message, an assistant message "(continued)" goes before the request, as Bedrock wants
    roles to alternate."""
    from strands import Agent
    from strands.agent.conversation_manager.summarizing_conversation_manager import DEFAULT_SUMMARIZATION_PROMPT

    folded = [{"role": m["role"], "content": m["content"]} for m in messages]
    if folded and folded[-1]["role"] == "user":  # the request is a user message: Bedrock wants roles to alternate
        folded.append({"role": "assistant", "content": [{"text": "(continued)"}]})
    agent = Agent(model=summarizer, system_prompt=DEFAULT_SUMMARIZATION_PROMPT, messages=folded, callback_handler=None)
    result = agent(SUMMARY_REQUEST)
    return {"role": "user", "content": [dict(block) for block in result.message["content"]]}


Observer = Callable[[str, Path], None]


def _replace(path: Path, text: str, observe: Observer | None = None) -> None:
    """Write a file whole as the SDK does (a new file in the same folder, renamed over the old one; never through a
    symbolic link)."""
    if path.is_symlink():
        raise StoreUnavailableError(f"{path} is a symbolic link; forget() never writes through one.")
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".forget_", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
        if observe is not None:
            observe("temporary file", Path(temporary))
            if path.exists():
                observe("old file", path)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _remove_leftovers(stores: Stores, observe: Observer | None = None) -> list[Path]:
    """Delete the `.forget_*.tmp` files a killed forget() left (a new copy written, never renamed into place: it may
    hold the text being redacted) in the stores' folders: the plan's folder, and every folder under the sessions and
    the markdown files. Links are unlinked, never followed. Each is shown to `observe` first."""
    found = list(stores.root.glob(".forget_*.tmp"))
    for folder in (stores.sessions, stores.markdown):
        for where, _, names in os.walk(folder):  # a linked folder is not entered (followlinks=False)
            found += [Path(where, n) for n in names if n.startswith(".forget_") and n.endswith(".tmp")]
    for path in sorted(set(found)):
        if observe is not None and not path.is_symlink():
            observe("leftover temporary file", path)
        path.unlink(missing_ok=True)
    return found


def forget(
    stores: Stores,
    key: str,
    *,
    user: str | None,
    summarizer: Any = None,
    rewrite_summaries: bool = True,
    busy_timeout: float = 1.0,
    observe: Observer | None = None,
    by: str = "lineage",
) -> ForgetReport:
    """Forget `key` for `user` (None: for every user) in every store, and return what was changed.

    `by="lineage"` (the default): the messages that state the fact are found by the offline model's reading of them
    (`sources`), and every artifact that descends from them (by the lineage it records) is deleted or re-derived;
    `by="text"`: every text that mentions the fact is changed, whatever it came from (the matching notebook 09
    compares it with: a memory worded another way escapes it).
    `summarizer` is the model that re-writes a summary that descends from a source (the notebook passes the agent's
    model); without one, the summary's sentences about the fact are cut out. `rewrite_summaries=False` leaves
    summaries as they are (the mistake notebook 09's first exercise shows). Raises `ForgetError` (nothing changed) for
    a missing, damaged or locked store, an unknown user, or a fact the user's data does not hold; `PartialForget`
    (some changes done, the rest not; run forget() again to finish) when a step of the plan fails.
    """
    if not isinstance(key, str) or not key.strip():
        raise ForgetError(f"forget() needs the fact's key, e.g. 'home address'; got {shown(key)}. Nothing was changed.")
    if by not in ("lineage", "text"):
        raise ForgetError(f"by must be 'lineage' or 'text'; got {shown(by)}. Nothing was changed.")
    _check_present(stores)
    # First, before any connection of ours opens the file: closing one would drop a lock taken through another SQLite.
    _no_lock_of_this_process(stores, busy_timeout)
    users = known_users(stores, busy_timeout)
    if user is not None and user not in users:
        raise UnknownUserError(
            f"No store holds anything of user {shown(user)} (the stores hold: {', '.join(users) or 'nobody'}). "
            "Nothing was changed. Check the user id."
        )
    scope = "every user" if user is None else f"user {shown(user)}"
    interrupted = _read_plan(stores, user, key)
    _remove_leftovers(stores, observe)

    def ours(owner: str | None) -> bool:
        return user is None or owner == user

    # 1. Read everything; find the messages that state the fact (the sources) and the values they state.
    agents = [(p, _read(p)) for p in _agent_files(stores)]
    agents = [(p, data) for p, data in agents if ours(data.get("state", {}).get("user_id"))]
    messages = {p: [(m, _read(m)) for m in _message_files(p)] for p, _ in agents}
    rows = [r for r in _vector_rows(stores, busy_timeout) if user is None or user in r[2]]
    memory = stores.markdown / "memory"
    user_dirs = [memory / user] if user is not None else (sorted(p for p in memory.iterdir() if p.is_dir()) if memory.is_dir() else [])
    notes = [(p, p.read_text(encoding="utf-8")) for d in user_dirs if d.is_dir() for p in sorted(d.glob("*.md"))]

    sources: set[tuple[str, int]] = set(interrupted or ())
    source_texts: list[str] = []
    for agent_json, _ in agents:
        session = _session_of(agent_json)
        for path, data in messages[agent_json]:
            text = message_text(data.get("message") or {})
            if stated_values(text, key):
                sources.add((session, _index_of(path)))
                source_texts.append(text)
    summary_texts = [message_text(s) for _, data in agents
                     if (s := data.get("conversation_manager_state", {}).get("summary_message"))]
    source_texts += [t for t in summary_texts if stated_values(t, key)]

    def descends(record: Any) -> bool:
        """Whether an artifact's lineage names a source message."""
        if not isinstance(record, dict):
            return False
        sessions = record.get("session_id")
        sessions = sessions if isinstance(sessions, list) else [sessions]
        return any((s, i) in sources for s in sessions for i in record.get("messages") or [])

    if by == "lineage":
        texts = list(source_texts)
    else:
        texts = [s for _, data in agents for s in _strings(data.get("conversation_manager_state", {}))]
        texts += [s for files in messages.values() for _, data in files for s in _strings(data.get("message"))]
        texts += [content for _, content, _, _ in rows] + [without_lineage(text) for _, text in notes]
    values = [v for t in texts for v in stated_values(t, key)]
    values += [v for _, data in agents for v in _state_values(data.get("state", {}), key)]
    values = sorted(dict.fromkeys(v.strip() for v in values if v.strip()), key=str.lower)
    report = ForgetReport(user, key, values, by=by, sources=sorted(sources, key=lambda s: (str(s[0]), s[1])))
    if not values and not sources:
        if interrupted is not None:
            stores.plan_file.unlink(missing_ok=True)
            return report
        raise NothingToForgetError(
            f"No store holds a {shown(key)} for {scope}: no message, summary, state entry, vector row or markdown line "
            "states it. Nothing was changed."
        )

    def doomed_text(text: str, record: Any) -> tuple[bool, str]:
        """Whether an artifact goes, and why: by its lineage, or (by="text", no lineage recorded, or a lineage that
        names no message: derived by "add", its messages unknown, or a "direct write" by code) by its text."""
        if by == "lineage" and isinstance(record, dict) and record.get("messages"):
            return descends(record), "descends from a source message"
        return mentions(text, key, values), ("states the fact (no lineage recorded)" if by == "lineage"
                                             else "states the fact")

    # 2. Plan every new file content (and the rewritten summaries) before changing anything.
    writes: dict[Path, str] = {}
    deletes: list[Path] = []
    said: dict[Path, list[Change]] = {}  # the changes each file's write or deletion makes

    def plan(path: Path, change: Change) -> None:
        said.setdefault(path, []).append(change)
    message_writes: dict[Path, str] = {}
    for agent_json, data in agents:
        session = _session_of(agent_json)
        redacted_messages = []
        changed_messages: list[bool] = []
        for path, message_data in messages[agent_json]:
            new = dict(message_data)
            if by == "text" or (session, _index_of(path)) in sources:
                for part in ("message", "redact_message"):
                    if new.get(part) is not None:
                        new[part] = _redact_json(new[part], key, values, drop_entries=False)
            redacted_messages.append(new["message"])
            changed_messages.append(new["message"] != message_data.get("message"))
            if new != message_data:
                message_writes[path] = json.dumps(new, indent=2, ensure_ascii=False)
                plan(path, Change("session messages", stores.show(path),
                                  "sentences stating the fact cut out of the message text"))
        new_agent = dict(data)
        state = _plan_state(data.get("state", {}), key, values, descends if by == "lineage" else None)
        if state != data.get("state", {}):
            new_agent["state"] = state
            plan(agent_json, Change("agent.state", stores.show(agent_json), "state entries holding the fact removed"
                                    + (" (by their lineage)" if by == "lineage" else "")))
        manager = dict(data.get("conversation_manager_state", {}))
        summary = manager.get("summary_message")
        folded_count = int(manager.get("removed_message_count", 0))
        if by == "lineage" and summary:
            own = (summary.get("metadata") or {}).get("custom", {}).get("lineage")
            record = own if isinstance(own, dict) and own.get("messages") else {
                "session_id": session, "messages": list(range(folded_count))}
            stale = descends(record) or bool(stated_values(message_text(summary), key))
        else:
            stale = bool(summary) and mentions(message_text(summary), key, values)
        if stale and rewrite_summaries:
            if summarizer is not None:
                folded = redacted_messages[:folded_count]
                manager["summary_message"] = {**_summarize(summarizer, folded),
                                              **{k: summary[k] for k in ("tracking_id", "metadata") if k in summary}}
                _rederived_now(manager["summary_message"])
                how = (f"summary re-written by the model from the {len(folded)} messages it folded, "
                       f"{sum(changed_messages[:folded_count])} of them redacted")
            else:
                manager["summary_message"] = _redact_json(summary, key, values, drop_entries=False)
                how = "summary's sentences stating the fact cut out"
            new_agent["conversation_manager_state"] = manager
            plan(agent_json, Change("summary", stores.show(agent_json), how))
        internal = _redact_json(data.get("_internal_state", {}), key, values, drop_entries=False)
        if internal != data.get("_internal_state", {}):
            new_agent["_internal_state"] = internal
        if new_agent != data:
            writes[agent_json] = json.dumps(new_agent, indent=2, ensure_ascii=False)
            if agent_json not in said:
                plan(agent_json, Change("session messages", stores.show(agent_json), "internal state's copies cut out"))
    for path, text in notes:
        lines = text.split("\n")
        kept = [line for line in lines if not doomed_text(*_markdown_line(line))[0]]
        if kept == lines:
            continue
        facts_left = [line for line in kept if line.strip() and not line.lstrip().startswith("#")]
        if not facts_left:
            deletes.append(path)
            plan(path, Change("markdown", stores.show(path), "file deleted (it held only the fact)"))
            continue
        target = path
        named_after = slug(_markdown_line(lines[0])[0])[:50].rstrip("-")  # FileMemoryStore names a file so
        if (lines[0] not in kept and path.stem == named_after) or any(slug(v) and slug(v) in path.name for v in values):
            first = _markdown_line(facts_left[0])[0]
            target = path.with_name(f"{slug(first)[:50].rstrip('-') or 'memory'}.md")
        if target != path:
            deletes.append(path)
        writes[target] = "\n".join(kept)
        plan(target, Change("markdown", stores.show(path), "lines stating the fact removed"
                            + (f"; renamed to {target.name} (its name came from a removed line)" if target != path else "")))
        if target != path:
            plan(path, Change("markdown", stores.show(path), "the file under its old name deleted"))
    doomed: list[int] = []  # rows with no lineage left: deleted
    shared: list[tuple[int, dict[str, Any]]] = []  # rows another user derived too: kept with their lineage only
    for memory_id, content, _, meta in rows:
        left = [(owner, record) for owner, record in _claims(meta)
                if not ((user is None or owner == user) and doomed_text(content, record)[0])]
        if not left:
            doomed.append(memory_id)
        elif len(left) < len(_claims(meta)):
            shared.append((memory_id, _kept_metadata(meta, left)))

    # 3. Take the database's write lock; a locked store stops everything here, before any change.
    _no_lock_of_this_process(stores, busy_timeout)
    db, module = connect(stores.vectors, timeout=busy_timeout)
    db.isolation_level = None
    try:
        db.execute("PRAGMA secure_delete = ON")
        db.execute("PRAGMA temp_store = MEMORY")  # VACUUM builds its copy in memory, not in a file under /tmp
        try:
            db.execute("BEGIN IMMEDIATE")
        except module.DatabaseError as error:
            raise _db_failure(stores, error, module) from None
        if not doomed and not shared and not writes and not deletes and not message_writes:
            db.execute("ROLLBACK")
            if interrupted is not None:
                stores.plan_file.unlink(missing_ok=True)
                return report
            raise NothingToForgetError(
                f"The values {values} of {shown(key)} for {scope} are stated nowhere forget() can remove them "
                "(they are already gone). Nothing was changed."
            )
        free_pages = db.execute("PRAGMA freelist_count").fetchone()[0]
        if not doomed and not shared:
            db.execute("ROLLBACK")

        # 4. The plan, whole, before the first change: the rows, VACUUM, then the files one by one.
        def delete_rows() -> None:
            try:
                if not db.in_transaction:
                    db.execute("BEGIN IMMEDIATE")
                for memory_id, metadata in shared:
                    db.execute("UPDATE memories SET metadata = ? WHERE id = ?",
                               (json.dumps(metadata, ensure_ascii=False), memory_id))
                for memory_id in doomed:
                    db.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
                    db.execute("DELETE FROM memory_vectors WHERE rowid = ?", (memory_id,))
                    db.execute("DELETE FROM memory_keywords WHERE rowid = ?", (memory_id,))
                db.execute("INSERT INTO memory_keywords(memory_keywords) VALUES ('optimize')")
                journal = stores.vectors.with_name(stores.vectors.name + "-journal")
                if observe is not None and journal.exists():
                    observe("rollback journal", journal)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        database = stores.show(stores.vectors)
        vacuumed = [Change("vector store", database, "VACUUM: the file rebuilt")]

        def vacuum() -> None:
            if observe is not None:
                observe("database before VACUUM", stores.vectors)
            db.execute("VACUUM")
            # measured, not assumed: the report says how many free pages SQLite counts after the rebuild
            free_after = db.execute("PRAGMA freelist_count").fetchone()[0]
            measured = Change("vector store", database,
                              f"VACUUM: the file rebuilt; PRAGMA freelist_count after it: {free_after}")
            report.plan = [measured if change is vacuumed[0] else change for change in report.plan]
            vacuumed[0] = measured

        def delete_file(path: Path) -> Callable[[], None]:
            def run() -> None:
                if observe is not None:
                    observe("old file", path)
                path.unlink(missing_ok=True)
            return run

        steps: list[_Step] = []
        row_changes = []
        if doomed:
            why = "descend from a source message" if by == "lineage" else "state the fact"
            row_changes.append(Change("vector store", database,
                                      f"{len(doomed)} row(s) that {why} deleted from memories, memory_vectors and "
                                      "memory_keywords (secure_delete on, FTS5 index merged)"))
        if shared:
            row_changes.append(Change("vector store", database,
                                      f"{len(shared)} row(s) another user derived too kept for them: only the "
                                      f"lineage of {scope} taken out of the row's metadata"))
        if row_changes:
            steps.append(_Step(row_changes, delete_rows))
        if doomed or shared or free_pages:
            steps.append(_Step(vacuumed, vacuum))
        steps += [_Step(said[path], lambda path=path, text=text: _replace(path, text, observe))
                  for path, text in writes.items()]
        steps += [_Step(said[path], delete_file(path)) for path in deletes if path not in writes]
        # the sources' own files come last: until they change, a rerun still finds the sources by reading them
        steps += [_Step(said[path], lambda path=path, text=text: _replace(path, text, observe))
                  for path, text in message_writes.items()]
        report.plan = [change for step in steps for change in step.changes]
        _write_plan(stores, report, observe)

        # 5. Apply it step by step; on a failure, say what was done and what is left.
        for number, step in enumerate(steps):
            try:
                _apply(step)
            except Exception as error:
                left = [change for later in steps[number:] for change in later.changes]
                raise PartialForget(report, step.changes[0], error, left) from error
            report.changes += step.changes
        stores.plan_file.unlink(missing_ok=True)
    finally:
        db.close()
    return report


def _claims(meta: dict[str, Any]) -> list[tuple[str | None, dict[str, Any] | None]]:
    """Each (user, lineage) a vector row records, first writer first: its own lineage (None when it records none),
    then each time the same text was derived again (`restated_in`), by the same user or another."""
    records = row_lineages(meta)
    if isinstance(meta.get(LINEAGE_KEY), dict):
        return [(r.get("user"), r) for r in records]
    return [(meta.get("user"), None), *((r.get("user"), r) for r in records)]


def _kept_metadata(meta: dict[str, Any], left: list[tuple[str | None, dict[str, Any] | None]]) -> dict[str, Any]:
    """A row's metadata with only the lineages `left`: the first becomes the row's user and lineage, the others its
    `restated_in`."""
    kept = {k: v for k, v in meta.items() if k not in ("user", LINEAGE_KEY, "restated_in")}
    (owner, record), rest = left[0], [r for _, r in left[1:] if r is not None]
    kept.update({LINEAGE_KEY: record} if record is not None else {})
    kept.update({"user": owner} if owner is not None else {})
    kept.update({"restated_in": rest} if rest else {})
    return kept


def _rederived_now(summary: dict[str, Any]) -> None:
    """A re-made summary keeps its lineage record (the same folded messages) with the time it was derived again."""
    record = ((summary.get("metadata") or {}).get("custom") or {}).get(LINEAGE_KEY)
    if isinstance(record, dict) and "derived" in record:
        summary["metadata"] = json.loads(json.dumps(summary["metadata"]))
        summary["metadata"]["custom"][LINEAGE_KEY]["at"] = datetime.now(UTC).isoformat()


def _session_of(agent_json: Path) -> str:
    """The session id of an agent.json (its folder is session_<id>/agents/agent_<id>/)."""
    return agent_json.parents[2].name.removeprefix("session_")


def _index_of(message_file: Path) -> int:
    return int(message_file.stem.split("_")[1])


def _markdown_line(line: str) -> tuple[str, dict[str, Any] | None]:
    """A markdown memory line's text (lineage comment cut out) and the lineage the comment records (None: none)."""
    found = read_markdown_lineage(line)
    if not found:
        return without_lineage(line), None
    text, record = found[0]
    return text, (record.to_dict() if record is not None else None)


def _plan_state(state: Any, key: str, values: list[str], descends: Callable[[Any], bool] | None) -> Any:
    """agent.state without the entries holding the fact. With `descends` (by lineage), an entry whose lineage
    (`state[STATE_LINEAGE_KEY][path]`, path "profile/home address" for a nested one) names a source message goes,
    with its record; entries with a record that names no source stay whatever they say; entries without a record are
    judged by their text (named like the key, or holding a value)."""
    if not isinstance(state, dict):
        return state
    records = state.get(STATE_LINEAGE_KEY) if isinstance(state.get(STATE_LINEAGE_KEY), dict) else {}
    new = json.loads(json.dumps(state))
    if descends is not None:
        for path, record in records.items():
            if descends(record):
                _drop_path(new, path)
                new[STATE_LINEAGE_KEY].pop(path, None)
    recorded = set(records) if descends is not None else set()
    return _drop_unrecorded(new, key, values, recorded, "")


def _drop_path(data: dict[str, Any], path: str) -> None:
    *parents, last = path.split("/")
    for name in parents:
        data = data.get(name) if isinstance(data, dict) else None
        if not isinstance(data, dict):
            return
    data.pop(last, None)


def _drop_unrecorded(data: Any, key: str, values: list[str], recorded: set[str], path: str) -> Any:
    if not isinstance(data, dict):
        return _redact_json(data, key, values, drop_entries=True)
    out = {}
    for name, item in data.items():
        here = f"{path}/{name}" if path else str(name)
        if here == STATE_LINEAGE_KEY or here in recorded:
            out[name] = item  # the lineage map itself, or an entry its lineage decides
            continue
        if _entry_states(str(name), item, key, values):
            continue
        out[name] = item if isinstance(item, str) else _drop_unrecorded(item, key, values, recorded, here)
    return out


def _write_plan(stores: Stores, report: ForgetReport, observe: Observer | None = None) -> None:
    """The plan on disk before the first change: the user, the key and the source messages (no value, no file name
    that could spell one), so a rerun after a failure still knows which messages it was forgetting."""
    data = {"user": report.user, "key": report.key, "by": report.by, "sources": [list(s) for s in report.sources],
            "steps": [{"store": c.store, "what": c.what} for c in report.plan]}
    _replace(stores.plan_file, json.dumps(data, indent=1, ensure_ascii=False))
    if observe is not None:
        observe("plan file", stores.plan_file)


def _read_plan(stores: Stores, user: str | None, key: str) -> set[tuple[str, int]] | None:
    """The sources of an interrupted forget of the same user and key (None: none was interrupted)."""
    if not stores.plan_file.is_file():
        return None
    data = _read(stores.plan_file)
    if data.get("user") != user or not _same_key(str(data.get("key")), key):
        raise ForgetError(
            f"An interrupted forget of {data.get('key')!r} for {data.get('user')!r} left its plan in "
            f"{stores.show(stores.plan_file)}. Nothing was changed: run that forget again to finish it first."
        )
    return {(str(s), int(i)) for s, i in data.get("sources", [])}


# ---------------------------------------------------------------------- counting what a user's data holds


STORE_NAMES = ("session messages", "summary", "agent.state", "vector store", "markdown")


def fact_counts(stores: Stores, user: str, pairs: list[tuple[str, str]], *, session: str | None = None,
                busy_timeout: float = 1.0) -> dict[str, int]:
    """How many times the user's data states each (key, value) pair, per store, read from the files and with SQL:
    message files and summary texts (statements), agent.state entries, the user's vector rows, markdown lines.

    `session` limits the session stores to one session id (the user's other sessions are not counted)."""

    def stated(text: str) -> int:
        found = {(facts.normalise_key(f.key), f.value.lower()) for f in facts.statements(text)}
        return sum((facts.normalise_key(k), v.lower()) in found for k, v in pairs)

    counts = dict.fromkeys(STORE_NAMES, 0)
    for agent_json in _agent_files(stores):
        data = _read(agent_json)
        if data.get("state", {}).get("user_id") != user:
            continue
        if session is not None and agent_json.parents[2].name != f"session_{session}":
            continue
        for path in _message_files(agent_json):
            counts["session messages"] += stated(message_text(_read(path)["message"]))
        summary = data.get("conversation_manager_state", {}).get("summary_message")
        counts["summary"] += stated(message_text(summary)) if summary else 0
        state = data.get("state", {})
        counts["agent.state"] += sum(
            any(_same_key(k, key) and str(v).lower() == value.lower() for k, v in _flat(state)) for key, value in pairs)
    counts["vector store"] = sum(stated(content) for _, content, named, _ in _vector_rows(stores, busy_timeout)
                                 if user in named)
    folder = stores.markdown / "memory" / user
    if folder.is_dir():
        counts["markdown"] = sum(stated(without_lineage(line)) for p in sorted(folder.glob("*.md"))
                                 for line in p.read_text(encoding="utf-8").split("\n"))
    return counts


def _flat(data: Any) -> list[tuple[str, Any]]:
    if isinstance(data, dict):
        return [pair for k, v in data.items() for pair in ([(str(k), v)] if not isinstance(v, (dict, list)) else _flat(v))]
    if isinstance(data, list):
        return [pair for item in data for pair in _flat(item)]
    return []


# ---------------------------------------------------------------------- what a running process still holds


def values_held(namespace: dict[str, Any], value: str, *, limit: int = 50_000) -> list[str]:
    """The names in `namespace` (a kernel's globals) whose object still holds `value` in a string somewhere inside
    (dicts, lists, tuples, sets, dataclasses and objects' attributes, followed up to `limit` objects per name).

    Modules, functions, classes and IPython's own objects are skipped, and so are names starting with "_" (IPython's
    history: In, Out, _1).
    The match is the byte scan's (NFKC, case folded, whitespace normalised)."""
    import types

    from companion.measure.byte_scan import normalise

    wanted = normalise(value).strip()
    seen: set[int] = set()
    budget = [0]

    def holds(obj: Any) -> bool:
        if budget[0] <= 0 or id(obj) in seen:
            return False
        seen.add(id(obj))
        budget[0] -= 1
        if isinstance(obj, str):
            return wanted in normalise(obj)
        if isinstance(obj, (bytes, int, float, bool, type(None), types.ModuleType, types.FunctionType, type)):
            return False
        if type(obj).__module__.split(".")[0] in ("IPython", "ipykernel"):  # exit, quit: the whole shell
            return False
        if isinstance(obj, dict):
            return any(holds(k) or holds(v) for k, v in obj.items())
        if isinstance(obj, (list, tuple, set, frozenset)):
            return any(holds(item) for item in obj)
        attributes = getattr(obj, "__dict__", None)
        if isinstance(attributes, dict):
            return holds(attributes)
        slots = getattr(type(obj), "__slots__", ())
        return any(holds(getattr(obj, name, None)) for name in ([slots] if isinstance(slots, str) else slots))

    def held_by(obj: Any) -> bool:
        seen.clear()
        budget[0] = limit
        return holds(obj)

    return sorted(name for name, obj in list(namespace.items())
                  if not name.startswith("_") and name not in ("In", "Out") and held_by(obj))
