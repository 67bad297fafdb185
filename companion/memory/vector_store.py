"""Long-term memory in one SQLite file: sqlite-vec for search by meaning, FTS5 for search by keyword.

`SqliteVecMemoryStore` implements the SDK's `strands.memory.MemoryStore` protocol (name, description,
max_search_results, writable, extraction; async `search` and `add`), so `MemoryManager` can offer it to an agent as a
search tool, inject from it, and extract into it. Synchronous twins (`put`, `search_vectors`, `search_keywords`) serve
notebooks and the evaluation.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import sqlite_vec
from strands.memory import MemoryEntry

from companion.memory.lineage import LINEAGE_KEY, LineageRecord, announced_tool_lineage
from companion.models.embeddings import Embedder
from companion.support.memory_loader import UserMemories

logger = logging.getLogger(__name__)
SCHEMA_VERSION = "1"
DEFAULT_BUSY_TIMEOUT = 5.0  # seconds a store waits for another writer's lock before saying the file is locked
_SQLITE_LOCK_BYTES = 0x40000000  # SQLite's POSIX locks sit on the bytes from here (pending, reserved, shared range)


class StoreError(RuntimeError):
    """A database file that is not (or not yet) a workbook memory store; nothing in it was changed."""


class StoreLockedError(StoreError):
    """Another connection holds a lock on a healthy store file; waiting longer, or closing that connection, helps."""


class StoreDamagedError(StoreError):
    """A store file whose pages SQLite cannot read (damaged mid-file); nothing in it was changed."""


class EmbedderMismatchError(StoreError):
    """Vectors of one embedder searched or extended with another's: the spaces are not comparable."""


@dataclass(frozen=True)
class AddResult:
    """What `put` did: the memory's id, whether it was new, and how many characters were left out of its vector."""

    id: str
    added: bool
    unembedded_chars: int = 0


@dataclass(frozen=True)
class Hit:
    """One search result with its score (cosine similarity for vectors, -bm25 for keywords: higher is better)."""

    id: str
    content: str
    score: float


@lru_cache(maxsize=1)
def _sqlite_module() -> Any:
    """The standard `sqlite3` if it can load sqlite-vec, else `sqlean`; decided once, on an in-memory database.

    The probe never opens the store's file: closing a file descriptor drops every POSIX lock the process holds on
    that file, so a probe on the real path would silently release another connection's lock (and invite damage).
    """
    import sqlite3

    probe = sqlite3.connect(":memory:")
    try:
        probe.enable_load_extension(True)
        sqlite_vec.load(probe)
        return sqlite3
    except (AttributeError, sqlite3.OperationalError):
        import sqlean

        return sqlean
    finally:
        probe.close()


def connect(path: str | os.PathLike, timeout: float = DEFAULT_BUSY_TIMEOUT) -> tuple[Any, Any]:
    """Open SQLite with sqlite-vec loaded: the standard `sqlite3` if it can load extensions, else `sqlean`.

    `timeout` is how long a statement waits for another connection's lock before failing with "database is locked".
    Returns (connection, the DB-API module that made it), so callers catch that module's errors.
    """
    module = _sqlite_module()
    connection = module.connect(str(path), timeout=timeout, check_same_thread=False)
    connection.enable_load_extension(True)
    sqlite_vec.load(connection)
    connection.enable_load_extension(False)
    return connection, module


def lock_holders(path: str | os.PathLike) -> str:
    """Who holds SQLite's locks on `path`, read from /proc/locks (Linux) without opening the file.

    Opening and closing the file here would drop every POSIX lock this process holds on it, so it is never opened.
    Returns e.g. "process 4242 (python -m notebook), holding a write lock" or "" when it cannot be told.
    """
    try:
        inode = os.stat(path).st_ino
        with open("/proc/locks", encoding="ascii", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return ""
    holders: dict[int, str] = {}
    for line in lines:
        fields = line.split()
        if "->" in fields or len(fields) < 8:
            continue  # a waiter, not a holder
        try:
            kind, pid, file_id, start = fields[3], int(fields[4]), fields[5], fields[6]
            if int(file_id.split(":")[-1]) != inode or int(start) < _SQLITE_LOCK_BYTES:
                continue
        except ValueError:
            continue
        if holders.get(pid) != "WRITE":
            holders[pid] = kind
    described = []
    for pid, kind in sorted(holders.items(), key=lambda item: item[1] != "WRITE"):
        lock = "a write lock (a write or an unfinished transaction)" if kind == "WRITE" else "a read lock"
        if pid == os.getpid():
            described.append(f"a connection in this same process (process {pid}: another store object or an open "
                             f"transaction of this kernel), holding {lock}")
        else:
            described.append(f"process {pid} ({_command_line(pid)}), holding {lock}")
    return "; ".join(described)


def locks_of_this_process(path: str | os.PathLike) -> str:
    """The SQLite locks this very process holds on `path` (read from /proc/locks, never opening the file), described.

    The store opens SQLite through the library `_sqlite_module()` picks (`sqlean` where the standard `sqlite3` cannot
    load extensions). SQLite tracks the locks of one library's connections in one process, but POSIX locks never
    conflict within a process, so a lock held here through ANOTHER copy of SQLite (the standard `sqlite3`, say) is
    invisible to this one: a write would go through and the other connection's commit would fail ("disk I/O error").
    A writer calls this before taking its own lock, when none of its own connections should hold one; a non-empty
    answer means: refuse. Returns "" when this process holds no lock on the file, or on systems without /proc/locks.
    """
    held = lock_holders(path)
    mine = f"process {os.getpid()}:"
    return "; ".join(part for part in held.split("; ") if mine in part) if held else ""


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            words = file.read().split(b"\0")
        return " ".join(w.decode(errors="replace") for w in words if w)[:120] or "command unknown"
    except OSError:
        return "command unknown"


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def row_lineages(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """Every lineage a row records: the one it was first derived with (`metadata["lineage"]`), then each time the same
    text was derived again (`metadata["restated_in"]`), each naming its user. A record written before the user was
    kept in it names the row's user (`metadata["user"]`, its first writer)."""
    records = [metadata.get(LINEAGE_KEY), *(metadata.get("restated_in") or [])]
    return [r if r.get("user") or not metadata.get("user") else {**r, "user": metadata["user"]}
            for r in records if isinstance(r, dict)]


def row_users(metadata: dict[str, Any]) -> list[str]:
    """Every user a row belongs to, first writer first: the row's user and the user each of its lineages names.

    A text two users both said is stored once (the `content` column is UNIQUE): it is each of theirs."""
    named = [metadata.get("user"), *(r.get("user") for r in row_lineages(metadata))]
    return [u for u in dict.fromkeys(named) if isinstance(u, str) and u]


def lineage_of_user(metadata: dict[str, Any], user: str) -> dict[str, Any] | None:
    """The lineage a row records for `user` (the first, if the user derived it more than once); None: none."""
    return next((r for r in row_lineages(metadata) if r.get("user") == user), None)


def with_lineage(content: str, metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The metadata `add` stores for `content`: as given when it carries a lineage; else with the lineage a `Lineage`
    hook announced for this add_memory entry, or an "add" record (reached with no lineage: its messages unknown)."""
    metadata = dict(metadata or {})
    if not isinstance(metadata.get(LINEAGE_KEY), dict):
        metadata[LINEAGE_KEY] = announced_tool_lineage(content) or LineageRecord("add").to_dict()
    return metadata


def _with_user(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata with its user written into its lineage record too (each record says whose memory it is)."""
    origin, user = metadata.get(LINEAGE_KEY), metadata.get("user")
    if isinstance(origin, dict) and user and not origin.get("user"):
        return {**metadata, LINEAGE_KEY: {**origin, "user": user}}
    return metadata


def keyword_query(text: str) -> str:
    """An FTS5 query that ORs the words of `text` (quoted, so punctuation cannot break the syntax)."""
    words = re.findall(r"\w+", text.lower())
    return " OR ".join(f'"{word}"' for word in dict.fromkeys(words))


class SqliteVecMemoryStore:
    """A Strands memory store backed by one SQLite file with a sqlite-vec index and an FTS5 index."""

    def __init__(
        self,
        path: str | os.PathLike,
        embedder: Embedder,
        *,
        name: str = "vector-memory",
        description: str = "Facts about the user, searched by meaning.",
        max_search_results: int = 5,
        min_score: float | None = None,
        writable: bool = True,
        extraction: Any = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        """Open (or create) the store at `path` (":memory:" for a throw-away one) for `embedder`'s vectors.

        `busy_timeout` (default 5 s) is how long opening, reading or writing waits while another connection holds a
        lock on the file (a writer in another process or kernel, or an unfinished transaction); after that the call
        raises StoreLockedError, saying who holds the lock. The file is healthy then: close the other holder and retry.

        Raises StoreError for a file that is not a memory store, StoreDamagedError for a file SQLite cannot read
        (naming it), and EmbedderMismatchError for another embedder's store; in every case the file is left exactly as
        it was.
        """
        self.name = name
        self.description = description
        self.max_search_results = max_search_results
        self.min_score = min_score
        self.writable = writable
        self.extraction = extraction
        self.embedder = embedder
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._check_folder()
        self._db, self._module = connect(self.path, timeout=busy_timeout)
        try:
            with self._guarded("opening it"):
                self._open()
        except BaseException:
            self._db.close()
            raise

    def _check_folder(self) -> None:
        """A store file in a folder that does not exist: say so, naming both (SQLite says only "unable to open")."""
        if self.path == ":memory:" or self.path.startswith("file:") or not self.path:
            return
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            what = "is not a folder" if os.path.exists(folder) else "does not exist"
            raise StoreError(
                f"Cannot open the memory store {self.path}: its folder {folder} {what}. Nothing was created. "
                "Create the folder first (pathlib.Path(folder).mkdir(parents=True)) or point the store at an "
                "existing one."
            )

    def _failure(self, error: Exception, doing: str) -> StoreError | None:
        """The store's own error for a locked or damaged file, or None for any other database error."""
        text = str(error)
        if isinstance(error, self._module.OperationalError) and ("locked" in text or "busy" in text):
            holder = lock_holders(self.path) or "another connection (in this or another process)"
            return StoreLockedError(
                f"The memory store {self.path} is locked by {holder}; {doing} waited {self.busy_timeout:g} s for it "
                f"(busy_timeout) and gave up ({text}). The file is healthy and nothing was changed. Let the other "
                "writer finish: close the other store (store.close()) or stop that process or kernel, then run this "
                "again, or open the store with a longer busy_timeout."
            )
        if "not a database" in text:
            return StoreError(
                f"{self.path} is not a SQLite database ({error}). Nothing was changed: "
                "point the store at a new file, or move this one aside."
            )
        if "malformed" in text or "corrupt" in text or "disk I/O" in text:
            return StoreDamagedError(
                f"The memory store {self.path} is damaged: SQLite cannot read part of it while {doing} ({text}). "
                "Nothing was changed. Keep the file for inspection (move it aside), then build a new store at this "
                "path and add the memories again."
            )
        return None

    @contextmanager
    def _guarded(self, doing: str):
        """Turn SQLite's raw lock and damage errors into the store's own, naming the file."""
        try:
            yield
        except self._module.DatabaseError as error:
            failure = self._failure(error, doing)
            if failure is None:
                raise
            try:
                if self._db.in_transaction:
                    self._db.rollback()
            except self._module.Error:
                pass
            raise failure from None

    def _open(self) -> None:
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        if not tables:
            self._create()
            return
        if "store_info" not in tables:
            raise StoreError(
                f"{self.path} is a SQLite database with other tables ({', '.join(sorted(tables)[:5])}), not a memory "
                "store. Nothing was changed: use a new file for the store."
            )
        info = dict(self._db.execute("SELECT key, value FROM store_info"))
        if info.get("model_id") != self.embedder.model_id or int(info.get("dimensions", 0)) != self.embedder.dimensions:
            raise EmbedderMismatchError(
                f"{self.path} holds vectors of {info.get('model_id')} ({info.get('dimensions')} dimensions); this store "
                f"was opened with {self.embedder.model_id} ({self.embedder.dimensions} dimensions). Vectors of different "
                "models are not comparable: open it with the same embedder, or build a new store and re-add the memories."
            )

    def _create(self) -> None:
        with self._db:
            self._db.execute("CREATE TABLE store_info (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._db.executemany(
                "INSERT INTO store_info VALUES (?, ?)",
                [("schema_version", SCHEMA_VERSION), ("model_id", self.embedder.model_id), ("dimensions", str(self.embedder.dimensions))],
            )
            self._db.execute(
                "CREATE TABLE memories (id INTEGER PRIMARY KEY, content TEXT NOT NULL UNIQUE, metadata TEXT NOT NULL)"
            )
            self._db.execute(
                f"CREATE VIRTUAL TABLE memory_vectors USING vec0(embedding float[{self.embedder.dimensions}] distance_metric=cosine)"
            )
            self._db.execute("CREATE VIRTUAL TABLE memory_keywords USING fts5(content, tokenize='unicode61 remove_diacritics 2')")

    # ------------------------------------------------------------------ writing

    def put(self, content: str, metadata: dict[str, Any] | None = None) -> AddResult:
        """Store one memory (embedded now); the same text twice is stored once."""
        return self.put_many([content], [metadata or {}])[0]

    def put_many(self, contents: Sequence[str], metadatas: Sequence[dict[str, Any]] | None = None) -> list[AddResult]:
        """Store many memories with one batched embedding call."""
        if not self.writable:
            raise StoreError(f"The memory store {self.name!r} is read-only (writable=False).")
        metadatas = list(metadatas or [{} for _ in contents])
        texts = [_normalise(c) for c in contents]
        if any(not t for t in texts):
            raise ValueError("A memory must contain some text; got an empty one.")
        results: list[AddResult | None] = [None] * len(texts)
        with self._lock, self._guarded("adding memories"):
            fresh: dict[str, int] = {}
            restated: dict[int, list[dict[str, Any]]] = {}
            for index, text in enumerate(texts):
                row = self._db.execute("SELECT id FROM memories WHERE content = ?", (text,)).fetchone()
                if row:
                    results[index] = AddResult(str(row[0]), added=False)
                    restated.setdefault(row[0], []).append(_with_user(metadatas[index]))
                elif text not in fresh:
                    fresh[text] = index
            if restated:
                self._restated(restated)
            if fresh:
                vectors = self.embedder.embed(list(fresh))
                with self._db:
                    for (text, index), vector in zip(fresh.items(), vectors):
                        cut = self._unembedded(text)
                        meta = dict(_with_user(metadatas[index]), **({"unembedded_chars": cut} if cut else {}))
                        cursor = self._db.execute(
                            "INSERT INTO memories (content, metadata) VALUES (?, ?)", (text, json.dumps(meta, ensure_ascii=False))
                        )
                        rowid = cursor.lastrowid
                        self._db.execute(
                            "INSERT INTO memory_vectors (rowid, embedding) VALUES (?, ?)",
                            (rowid, np.asarray(vector, dtype=np.float32).tobytes()),
                        )
                        self._db.execute("INSERT INTO memory_keywords (rowid, content) VALUES (?, ?)", (rowid, text))
                        results[index] = AddResult(str(rowid), added=True, unembedded_chars=cut)
            for index, text in enumerate(texts):
                if results[index] is None:  # a duplicate within this same batch
                    results[index] = AddResult(results[fresh[text]].id, added=False)  # type: ignore[union-attr]
        return results  # type: ignore[return-value]

    def _restated(self, written: dict[int, list[dict[str, Any]]]) -> None:
        """The same memory derived again (another batch of messages, or another user, restated it): its row keeps one
        copy of the text and adds the new lineage to `metadata["restated_in"]`, so every message it descends from,
        and every user it belongs to, is on record. A write without lineage by a user the row does not name yet is
        recorded as a "direct write" of that user (no message behind it)."""
        with self._db:
            for rowid, metadatas in written.items():
                (raw,) = self._db.execute("SELECT metadata FROM memories WHERE id = ?", (rowid,)).fetchone()
                meta = json.loads(raw or "{}")
                fresh: list[dict[str, Any]] = []
                for given in metadatas:
                    origin = given.get(LINEAGE_KEY)
                    if not isinstance(origin, dict):
                        user = given.get("user")
                        if not user or user in row_users(meta) or any(o.get("user") == user for o in fresh):
                            continue
                        origin = LineageRecord("direct write", user=user).to_dict()
                    if origin not in row_lineages(meta) and origin not in fresh:
                        fresh.append(origin)
                if fresh:
                    meta["restated_in"] = [*meta.get("restated_in", []), *fresh]
                    self._db.execute("UPDATE memories SET metadata = ? WHERE id = ?",
                                     (json.dumps(meta, ensure_ascii=False), rowid))

    def _unembedded(self, text: str) -> int:
        """Characters past the embedder's token limit: stored and keyword-searchable, but not in the vector."""
        part = getattr(self.embedder, "embedded_part", None)
        if part is None:
            return 0
        kept = part(text)
        cut = len(text) - len(kept)
        if cut > 0:
            logger.warning(
                "memory is longer than %s word pieces: only its first %d characters are embedded; "
                "the rest (%r...) is stored and keyword-searchable but not searchable by meaning",
                getattr(self.embedder, "max_tokens", "?"),
                len(kept),
                text[len(kept) : len(kept) + 40].strip(),
            )
        return max(cut, 0)

    # ------------------------------------------------------------------ reading

    def count(self) -> int:
        """How many memories the store holds."""
        with self._lock, self._guarded("counting memories"):
            return self._db.execute("SELECT count(*) FROM memories").fetchone()[0]

    def records(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Every memory with its metadata (the user, and the lineage: where it came from), in insertion order."""
        with self._lock, self._guarded("reading memories"):
            rows = self._db.execute("SELECT id, content, metadata FROM memories ORDER BY id").fetchall()
        return [(str(i), c, json.loads(m or "{}")) for i, c, m in rows]

    def all(self) -> list[tuple[str, str, np.ndarray]]:
        """Every memory with its vector, in insertion order (for plots)."""
        with self._lock, self._guarded("reading memories"):
            rows = self._db.execute(
                "SELECT m.id, m.content, v.embedding FROM memories m JOIN memory_vectors v ON v.rowid = m.id ORDER BY m.id"
            ).fetchall()
        return [(str(i), c, np.frombuffer(e, dtype=np.float32)) for i, c, e in rows]

    def search_vectors(self, query: str, k: int | None = None) -> list[Hit]:
        """Nearest memories by cosine similarity of embeddings (exact search over the whole index)."""
        k = k or self.max_search_results
        vector = self.embedder.embed([query])[0]
        with self._lock, self._guarded("searching by meaning"):
            rows = self._db.execute(
                "SELECT v.rowid, v.distance, m.content FROM memory_vectors v JOIN memories m ON m.id = v.rowid "
                "WHERE v.embedding MATCH ? AND k = ? ORDER BY v.distance",
                (np.asarray(vector, dtype=np.float32).tobytes(), k),
            ).fetchall()
        hits = [Hit(str(rowid), content, round(1.0 - distance, 4)) for rowid, distance, content in rows]
        return [h for h in hits if self.min_score is None or h.score >= self.min_score]

    def search_keywords(self, query: str, k: int | None = None) -> list[Hit]:
        """Memories sharing words with the query, ranked by FTS5's BM25 (any word may match)."""
        k = k or self.max_search_results
        expression = keyword_query(query)
        if not expression:
            return []
        with self._lock, self._guarded("searching by keyword"):
            rows = self._db.execute(
                "SELECT rowid, bm25(memory_keywords), content FROM memory_keywords WHERE memory_keywords MATCH ? "
                "ORDER BY bm25(memory_keywords) LIMIT ?",
                (expression, k),
            ).fetchall()
        return [Hit(str(rowid), content, round(-rank, 4)) for rowid, rank, content in rows]

    # ------------------------------------------------------------------ the MemoryStore protocol

    async def search(self, query: str, options: dict[str, Any] | None = None) -> list[MemoryEntry]:
        """The SDK's search: vector hits, best first, each with its score in the metadata."""
        k = (options or {}).get("max_search_results") or self.max_search_results
        hits = self.search_vectors(query, k)
        origins = self._lineages([h.id for h in hits])
        return [MemoryEntry(content=h.content, metadata={"score": h.score, "id": h.id,
                                                         **({LINEAGE_KEY: origins[h.id]} if h.id in origins else {})})
                for h in hits]

    def _lineages(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The lineage recorded in the metadata of each of these rows (rows without one are left out)."""
        if not ids:
            return {}
        with self._lock, self._guarded("reading lineage"):
            rows = self._db.execute(f"SELECT id, metadata FROM memories WHERE id IN ({', '.join('?' * len(ids))})",
                                    [int(i) for i in ids]).fetchall()
        found = {str(i): json.loads(m or "{}").get(LINEAGE_KEY) for i, m in rows}
        return {i: o for i, o in found.items() if isinstance(o, dict)}

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """The SDK's add (search tool, add tool, extraction): store one memory, return its id. The metadata is kept
        with the row (JSON): an extracted fact's `lineage` (`ExtractionResult.metadata`, filled by
        `companion.memory.lineage.LineageExtractor`) says which messages it came from. The SDK's `add_memory` tool
        gives no metadata: the lineage is then the one a `Lineage` hook on the agent announced for this entry
        ("tool call": the session, the user's message and the assistant's request); without one it is recorded as
        derived by "add" (its messages unknown)."""
        return self.put(content, with_lineage(content, metadata)).id

    def close(self) -> None:
        """Close the database file."""
        self._db.close()

    def __enter__(self) -> SqliteVecMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_parameters(memories: UserMemories, *, embedder: str, query: str, top_k: int, min_score: float) -> None:
    """Notebook 06's parameters: a bad one raises `ParameterError`, which says what it must be, before anything is
    written."""
    from companion.models.embeddings import EMBEDDERS
    from companion.support import parameters as check

    check.choice("embedder", embedder, EMBEDDERS)
    check.text("query", query, why="the question every search here asks")
    total = len(memories.memories)
    check.integer("top_k", top_k, minimum=1, maximum=total, why=f"the stores hold {total} memories")
    check.fraction("min_score", min_score, low=-1.0, high=1.0, include_low=True, why="a cosine similarity")
