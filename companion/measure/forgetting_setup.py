"""The conversations notebooks 09 and 10 forget from: two users, each fact in five stores, and a reworded note.

`forgetting_script(...)` checks the notebooks' parameters (a bad one raises `ParameterError` before anything is
written) and returns the script: each user's eight lines (the fact to forget first, the user's other facts with
chatter between them, one question about the fact). `plant(root, script, embedder, model=...)` replays both users'
conversations through agents that write every store at once, then lets a second writer, the note-taker, add the fact
to the user's markdown folder in its own words ("Harbour Lane, no. 12"), with the lineage of the message it read.

The agent (`memory_agent`) is the one notebook 09 builds in its own cell: a `FileSessionManager` (message files and
agent.json), a summarizing conversation manager that folds old messages within a few turns (its summary in
agent.json), a hook that keeps a profile of the user's facts in `agent.state`, and a `MemoryManager` that extracts
facts after every turn into a SQLite vector store shared by both users and the SDK's markdown `FileMemoryStore`, one
folder per user. Every memory records the messages it came from (`companion.memory.lineage`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strands import Agent
from strands.hooks import AfterInvocationEvent
from strands.memory import InvocationTrigger, MemoryManager, ModelExtractor
from strands.session import FileSessionManager
from strands.storage import LocalFileStorage

from companion.measure.byte_scan import Place, index_terms, scan
from companion.measure.forgetting import STORE_NAMES, Stores, fact_counts
from companion.memory.lineage import Lineage, LineageExtractor, LineageRecord, message_lineage, read_markdown_lineage
from companion.memory.lineage_markdown import LineageFileMemoryStore
from companion.memory.user_scope import UserScopedVectors
from companion.memory.vector_store import SqliteVecMemoryStore
from companion.models import facts
from companion.models.converse_rules import ConverseSummarizingConversationManager
from companion.sessions.session_files import check_session_id, read_json
from companion.support.conversations import load_script
from companion.support.messages import is_summary, message_text
from companion.support.parameters import ParameterError, different, text


@dataclass(frozen=True)
class ForgettingScript:
    """Who says what: `user` asks to forget `fact_key` (their `value`); `other_user` said `other_value` for it."""

    fact_key: str
    user: str
    value: str
    other_user: str
    other_value: str
    near_key: str
    near_value: str
    others: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    chatter: tuple[str, ...] = ()
    plant_form: str = "My {key} is {value}."
    question_form: str = "What is my {key}?"

    @property
    def users(self) -> tuple[str, str]:
        return self.user, self.other_user

    def said(self, name: str) -> str:
        """The value `name` said for the fact to forget."""
        return self.value if name == self.user else self.other_value

    def pairs(self, name: str) -> list[tuple[str, str]]:
        """The user's other facts (key, value), in the order they are said; the user's own start with the near fact."""
        return list(self.others[name])

    def kept_pairs(self) -> list[tuple[str, str]]:
        """Everything the other user said: their value for the fact, then their other facts."""
        return [(self.fact_key, self.other_value), *self.pairs(self.other_user)]

    def question(self, key: str) -> str:
        return self.question_form.format(key=key)

    def lines(self, name: str) -> list[str]:
        """The user's conversation: the fact first, the other facts with chatter between them, one question."""
        others = [self.plant_form.format(key=k, value=v) for k, v in self.pairs(name)]
        return [self.plant_form.format(key=self.fact_key, value=self.said(name)), *others[:-2], self.chatter[0],
                others[-2], self.question(self.fact_key), others[-1], self.chatter[1]]

    def to_dict(self) -> dict[str, Any]:
        return {"fact_key": self.fact_key, "user": self.user, "value": self.value, "other_user": self.other_user,
                "other_value": self.other_value, "near_key": self.near_key, "near_value": self.near_value,
                "others": {name: [list(p) for p in pairs] for name, pairs in self.others.items()},
                "chatter": list(self.chatter)}


def forgetting_script(*, fact_key: str, user: str, value: str, other_user: str, other_value: str,
                      near_key: str = "favourite pub", near_value: str = "the Harbour Inn") -> ForgettingScript:
    """The notebooks' parameters, checked, as a script. Raises ParameterError (nothing written) when the offline
    model would not read each fact as said, a value occurs elsewhere in the conversation, or the two users are one."""
    fact_key, value, other_value = text("fact_key", fact_key), text("value", value), text("other_value", other_value)
    near_key, near_value = text("near_key", near_key), text("near_value", near_value)
    check_session_id(user), check_session_id(other_user)  # user ids name sessions and folders
    different(("user", "other_user"), (user, other_user), why="one user forgets, the other must keep everything")
    data = load_script("forgetting")  # data/conversations/forgetting.json
    shape = dict(zip(("first", "second"), (user, other_user)))
    others = {shape[which]: [(f["key"], f["value"]) for f in data["users"][which]["facts"]] for which in shape}
    others[user].insert(0, (near_key, near_value))  # a fact of the same user, in a turn of its own
    for name, key, said in [("value", fact_key, value), ("other_value", fact_key, other_value),
                            ("near_value", near_key, near_value)]:
        read = [(facts.normalise_key(f.key), f.value) for f in facts.statements(data["plant"].format(key=key, value=said))]
        if read != [(facts.normalise_key(key), said)]:
            raise ParameterError(f"The offline model must read 'My {key} is {said}.' as {key} = {said}; it reads "
                                 f"{read}. Change fact_key or {name} in the parameters cell (or papermill -p).")
    rest = " ".join([user, other_user, fact_key, *data["chatter"], *(f"{k} {v}" for p in others.values() for k, v in p)])
    for a, b in [(value, other_value), (other_value, value)]:
        if a.lower() in b.lower() or a.lower() in rest.lower():
            raise ParameterError(f"{a!r} must not occur in {b!r} or in the rest of the conversation ({rest!r}): the "
                                 "scan looks for the value's text. Change value or other_value.")
    if len(re.findall(r"\w+", value)) < 2:
        raise ParameterError(f"value must have two words or more (the note-taker rewords it by moving them); got "
                             f"{value!r}.")
    if not index_terms(value):
        raise ParameterError("value must hold a word of 3 or more letters or digits (the scan looks for such words in "
                             f"FTS5's index); got {value!r}.")
    if any(facts.normalise_key(k) == facts.normalise_key(fact_key) for p in others.values() for k, _ in p):
        raise ParameterError(f"fact_key {fact_key!r} is one of the conversation's other facts; choose another key.")
    return ForgettingScript(fact_key, user, value, other_user, other_value, near_key, near_value, others,
                            tuple(data["chatter"]), data["plant"], data["question"])


# ---------------------------------------------------------------------- the agent and its stores


def remember_profile(event: AfterInvocationEvent) -> None:
    """After each turn, keep the user's stated facts in agent.state["profile"] (saved in agent.json), and the message
    each came from in agent.state["lineage"]["profile/<key>"]."""
    said = next(m for m in reversed(event.agent.messages) if m["role"] == "user" and not is_summary(m))
    profile = dict(event.agent.state.get("profile") or {})
    records = dict(event.agent.state.get("lineage") or {})
    stamp = message_lineage(said) or {}
    for fact in facts.statements(message_text(said)):
        profile[fact.key] = fact.value
        records[f"profile/{fact.key}"] = LineageRecord(
            "state write", stamp.get("session_id"), (stamp.get("message_index", -1),)).to_dict()
    event.agent.state.set("profile", profile)
    event.agent.state.set("lineage", records)


def summarizing_manager() -> ConverseSummarizingConversationManager:
    """Folds old messages into a summary within a few turns (a tiny proactive threshold); Bedrock accepts its calls."""
    return ConverseSummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2,
                                                  proactive_compression={"compression_threshold": 0.0002})


def markdown_store(stores: Stores, name: str, extraction: Any = None) -> LineageFileMemoryStore:
    """The SDK's markdown FileMemoryStore for one user (memory/<name>/), each line with its lineage."""
    return LineageFileMemoryStore(name=name, storage=LocalFileStorage(base_dir=str(stores.markdown)),
                                  extraction=extraction)


def lineage_hooks(sessions: FileSessionManager) -> list[Any]:
    """The agent's hooks: `Lineage` numbers each message as its session file is numbered; `remember_profile` copies
    each stated fact into agent.state, with the number of the message it came from."""
    return [Lineage(sessions), remember_profile]


def long_term_stores(stores: Stores, vector_store: SqliteVecMemoryStore, name: str, *,
                     extract: bool = True) -> list[Any]:
    """The user's two long-term stores for a MemoryManager: the shared SQLite vector store, scoped to the user, and
    the user's markdown folder. With `extract`, a ModelExtractor fills both after every turn, and `LineageExtractor`
    adds to each fact the numbers of the messages it came from; without it, the stores are only searched."""
    extraction = {"trigger": InvocationTrigger(), "extractor": LineageExtractor(ModelExtractor())} if extract else None
    return [UserScopedVectors(vector_store, name, extraction=extraction),
            markdown_store(stores, name, extraction=extraction)]


def memory_agent(stores: Stores, vector_store: SqliteVecMemoryStore, name: str, model: Any) -> Agent:
    """The agent notebook 09 builds: every store at once, every memory with its lineage."""
    sessions = FileSessionManager(session_id=f"{name}-chat", storage_dir=str(stores.sessions))
    return Agent(
        model=model,
        session_manager=sessions,
        conversation_manager=summarizing_manager(),
        memory_manager=MemoryManager(stores=long_term_stores(stores, vector_store, name),
                                     search_tool_config=False, injection=False),
        hooks=lineage_hooks(sessions),
        state={"user_id": name},
        callback_handler=None,
    )


def reworded(said: str) -> str:
    """The value with its words moved: '12 Harbour Lane' -> 'Harbour Lane, no. 12'."""
    words = re.findall(r"\w+", said)
    if words[0].isdigit():
        return f"{' '.join(words[1:])}, no. {words[0]}"
    return f"{' '.join(words[1:])}, {words[0]}"


def message_files(stores: Stores, session_id: str) -> list[Path]:
    """A session's message files, in the order of their index."""
    folder = next(stores.sessions.glob(f"session_{session_id}/agents/agent_*"))
    return sorted(folder.glob("messages/message_*.json"), key=lambda p: int(p.stem.removeprefix("message_")))


def agent_json(stores: Stores, session_id: str) -> Path:
    return next(stores.sessions.glob(f"session_{session_id}/agents/agent_*")) / "agent.json"


def note_taker(stores: Stores, name: str, fact_key: str) -> tuple[str, dict[str, Any]]:
    """A second writer: reads the user's first message that states `fact_key` and keeps a note of it in its own words,
    with that message's lineage. Returns the note and its lineage."""
    for path in message_files(stores, f"{name}-chat"):
        stated = [f.value for f in facts.statements(message_text(read_json(path)["message"]))
                  if facts.normalise_key(f.key) == facts.normalise_key(fact_key)]
        if stated:
            index = int(path.stem.removeprefix("message_"))
            break
    note = f"{fact_key}: {reworded(stated[0])}"
    origin = LineageRecord("extraction", f"{name}-chat", (index,), user=name).to_dict()
    markdown_store(stores, name).add_now(note, {"lineage": origin})
    return note, origin


@dataclass
class Planted:
    """What `plant` wrote: the stores, the shared vector store, each user's replies and the note-taker's notes."""

    stores: Stores
    vector_store: SqliteVecMemoryStore
    replies: dict[str, list[str]]
    notes: dict[str, tuple[str, dict[str, Any]]]


Build = Callable[[Stores, SqliteVecMemoryStore, str], Agent]


def plant(root: str | Path, script: ForgettingScript, embedder: Any, *, model: Any = None,
          build: Build | None = None) -> Planted:
    """Both users' conversations through agents from `build(stores, vector_store, name)` (default: `memory_agent`
    on `model`), then the note-taker's note for each, all under `root`."""
    Path(root).mkdir(parents=True, exist_ok=True)
    stores = Stores.under(root)
    vector_store = SqliteVecMemoryStore(stores.vectors, embedder, name="vectors")
    build = build or (lambda s, v, name: memory_agent(s, v, name, model))
    replies = {}
    for name in script.users:
        agent = build(stores, vector_store, name)
        replies[name] = [str(agent(line)).strip() for line in script.lines(name)]
    notes = {name: note_taker(stores, name, script.fact_key) for name in script.users}
    return Planted(stores, vector_store, replies, notes)


def copy_stores(stores: Stores, target: str | Path) -> Stores:
    """A copy of every store file under `target` (a backup, or a copy to experiment on)."""
    shutil.copytree(stores.root, target)
    return Stores.under(target)


# ---------------------------------------------------------------------- reading what was planted


def store_of(stores: Stores, place: Place) -> str:
    """Which of the five stores a place the byte scan found belongs to."""
    sessions, markdown = stores.show(stores.sessions), stores.show(stores.markdown)
    if place.file.startswith(sessions + "/"):
        if "/messages/" in place.file:
            return "session messages"
        return "summary" if "summary_message" in place.where else "agent.state"
    if place.file.startswith(markdown + "/"):
        return "markdown"
    return "vector store" if place.file == stores.show(stores.vectors) else "other"


def scan_rows(stores: Stores, places: list[Place]) -> list[dict[str, str]]:
    """The byte scan's places with the store each belongs to, for a table."""
    return [{"store": store_of(stores, p), "file": p.file, "where": p.where, "found": p.found} for p in places]


def short(file: str) -> str:
    """A file of the stores as a table shows it: a session's files without `sessions/session_<id>/agents/<agent>/`."""
    return re.sub(r"^sessions/session_[^/]+/agents/[^/]+/", "", file)


_FOUND = {"text": "the text", "the fact's embedding (float32 bytes)": "its embedding",
          "text in a file or folder name": "the file's name"}


def landed_rows(stores: Stores, places: list[Place]) -> list[dict[str, Any]]:
    """The byte scan's places, one row per store and file: how many places, and what each holds (the text, its
    embedding, the file's name), without SQLite's pages (notebook 10 opens them)."""
    rows: dict[tuple[str, str], list[str]] = {}
    for place in places:
        rows.setdefault((store_of(stores, place), short(place.file)), []).append(_FOUND.get(place.found, place.found))
    return [{"store": store, "file": file, "places": len(found),
             "holding": ", ".join(f"{what} ({found.count(what)} copies)" if found.count(what) > 1 else what
                                  for what in dict.fromkeys(found))}
            for (store, file), found in rows.items()]


def forget_rows(report: Any) -> list[dict[str, str]]:
    """What forget() changed, one row per store: the files by name, and what changed (the vector store's SQLite
    steps named without their pragmas; notebook 10 shows why each is needed)."""
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for change in report.changes:
        what = change.what
        if change.store == "vector store":
            what = re.sub(r" deleted from .*", " deleted", what).split(";")[0]
        files, whats = rows.setdefault(change.store, ([], []))
        files += [] if change.file.rsplit("/", 1)[-1] in files else [change.file.rsplit("/", 1)[-1]]
        whats += [] if what in whats else [what]
    return [{"store": store, "files": ", ".join(files), "what changed": "; ".join(whats)}
            for store, (files, whats) in rows.items()]


def count_rows(before: Stores, after: Stores, script: ForgettingScript) -> list[dict[str, str]]:
    """Each store's statements of each group of facts, as "before -> after", read by `fact_counts` in the copy taken
    before and in the stores now: the fact forgotten, the user's near fact (it shares a word with the value), the
    user's other facts, the other user's facts."""
    user, other = script.user, script.other_user
    groups = {script.fact_key: (user, [(script.fact_key, script.value)]),
              script.near_key: (user, [(script.near_key, script.near_value)]),
              f"{user}'s other facts": (user, [p for p in script.pairs(user) if p[0] != script.near_key]),
              f"{other}'s facts": (other, script.kept_pairs())}
    rows = []
    for label, (name, pairs) in groups.items():
        was, now = fact_counts(before, name, pairs), fact_counts(after, name, pairs)
        rows.append({"facts": label, **{store: f"{was[store]} \u2192 {now[store]}" for store in STORE_NAMES}})
    return rows


def scan_for(root: str | Path, script: ForgettingScript, embedder: Any, name: str | None = None) -> Any:
    """The byte scan for a user's value (default: the user who forgets), with the embedding of the sentence the
    extractor stores it as."""
    name = name or script.user
    said = script.said(name)
    return scan(root, said, sentence=f"The user's {script.fact_key} is {said}.", embedder=embedder, user=name)


def lineage_rows(planted: Planted, name: str) -> list[dict[str, str]]:
    """Each memory derived from the user's conversation, read from each store's own files, and the messages its
    lineage names: vector rows (metadata), markdown lines (comments), agent.state entries, the summary."""
    stores = planted.stores

    def row(store: str, memory: str, origin: dict[str, Any]) -> dict[str, str]:
        return {"store": store, "memory": memory, "from messages": _indexes(origin.get("messages") or [])}

    rows = [row("vector store", content, meta.get("lineage") or {})
            for _, content, meta in planted.vector_store.records() if meta.get("user") == name]
    for path in sorted((stores.markdown / "memory" / name).glob("*.md")):
        for line, record in read_markdown_lineage(path.read_text(encoding="utf-8")):
            rows.append(row("markdown", line, record.to_dict() if record else {}))
    data = read_json(agent_json(stores, f"{name}-chat"))
    for path, origin in data["state"].get("lineage", {}).items():
        entry = data["state"]["profile"].get(path.split("/")[-1])
        rows.append(row("agent.state", f"{path.split('/')[-1]}: {entry}", origin))
    summary = data["conversation_manager_state"]["summary_message"]
    return rows + [row("summary", "the summary in agent.json", message_lineage(summary) or {})]


def _indexes(numbers: list[int]) -> str:
    """Message indexes as a person writes them: '0, 1', '0-10', or '-' for none."""
    numbers, parts = sorted(set(numbers)), []
    for n in numbers:
        if parts and n == parts[-1][1] + 1:
            parts[-1][1] = n
        else:
            parts.append([n, n])
    return ", ".join(str(a) if a == b else (f"{a}, {b}" if b == a + 1 else f"{a}-{b}") for a, b in parts) or "-"


# ---------------------------------------------------------------------- notebook 10: a lock held elsewhere

_HOLD = ("import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.read()")


@contextmanager
def another_writer(path: str | Path) -> Iterator[int]:
    """Another process holds SQLite's write lock on `path` (an unfinished transaction) for the block; yields its
    process id. SQLite sees a lock held by another process on every system."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "locked":
            raise RuntimeError(f"the lock holder for {path} did not start")
        yield holder.pid
    finally:
        holder.communicate("")


def refusal_text(error: BaseException, stores: Stores) -> str:
    """A refusal as a person reads it, the same on every run: the folder named by its name, the other process
    without its id and command line."""
    text = str(error).replace(str(stores.root), stores.root.name)
    return re.sub(r"process \d+ \(.*\), holding", "another process, holding", text, flags=re.DOTALL)


# ---------------------------------------------------------------------- notebook 10: FTS5's index data, read with SQL


def index_data_words(path: str | Path, value: str) -> list[str]:
    """The value's words that FTS5's index data still holds, read with SQL: the blocks of `memory_keywords_data` (the
    index's live segments), not the file's pages. Only words no live row has count (the byte scan's index terms: 3
    characters or more, found as written, case folded or without accents)."""
    import unicodedata

    from companion.measure.byte_scan import normalise
    from companion.memory.vector_store import connect

    db, _ = connect(path)
    try:
        blocks = b"".join(b for (b,) in db.execute("SELECT block FROM memory_keywords_data") if isinstance(b, bytes))
        left = [w for w in index_terms(value) if not db.execute(
            "SELECT count(*) FROM memory_keywords WHERE memory_keywords MATCH ?", (f'"{w}"',)).fetchone()[0]]
    finally:
        db.close()

    def forms(word: str) -> set[bytes]:
        bare = "".join(c for c in unicodedata.normalize("NFKD", normalise(word)) if not unicodedata.combining(c))
        return {w.encode("utf-8") for w in (word, normalise(word), bare)}

    lowered = blocks.lower()
    return [w for w in left if any(re.search(rb"(?<![0-9a-z])0?" + re.escape(f), lowered) for f in forms(w))]
