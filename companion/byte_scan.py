"""The proof that a fact is gone: read every byte under a folder and report every place the fact still appears.

`scan(root, value, ...)` reads each file under `root` as raw bytes (nothing is parsed first, so a SQLite file's free
pages, a journal or a WAL file are read like any other bytes) and looks for:

- the fact's text: the value, case-insensitive, as UTF-8 and as JSON writes it with non-ASCII characters escaped;
- the fact's text in a file or folder name (FileMemoryStore names a file after a memory's first line);
- the fact's embedding: the first 64 bytes of the float32 vector of the fact's sentence, as a vector store keeps it;
- index terms: a word of the value that no live row of a SQLite FTS5 table contains any more, yet whose bytes are
  still in that table's index pages (FTS5 keeps a deleted document's terms until its segments are merged);
- the nearest memory: the user's memory whose embedding is nearest to the fact's, if it holds the value or is within
  `NEAR` (cosine) of it, read through SQL from a memory-store file (`memories` + sqlite-vec `memory_vectors`).

Each finding is a `Place` that says which file, where in it (JSON path, markdown line, SQLite page and the table
that owns the page, or "free page") and what was found. The scan only reads: SQLite files are opened read-only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SQLITE_HEADER = b"SQLite format 3\x00"
NEAR = 0.8
"""Cosine from which a memory counts as the fact said another way (a paraphrase of an address scores about 0.84 with
all-MiniLM-L6-v2; another user's address about 0.77)."""
NEWLINE = b"\n"
EMBEDDING_PREFIX = 64  # bytes of the float32 vector searched for: 16 dimensions, never all zero for a real sentence


@dataclass(frozen=True)
class Place:
    """One place a fact still appears: a file (relative to the scanned folder), where in it, and what was found."""

    file: str
    where: str
    found: str
    offset: int | None = None


@dataclass
class ScanReport:
    """What `scan` read and found."""

    places: list[Place]
    files: int
    bytes: int
    nearest: dict[str, Any] | None = None

    def rows(self) -> list[dict[str, Any]]:
        """One dict per place, for `companion.display.table`."""
        return [{"file": p.file, "where": p.where, "found": p.found} for p in self.places]


def slug(text: str) -> str:
    """The kebab-case form FileMemoryStore gives a file name (lower case, letters and digits, '-' between words)."""
    text = re.sub(r"[^a-z0-9\s-]", "", text.lower()).strip()
    return re.sub(r"\s+", "-", text)


def text_needles(value: str) -> list[tuple[str, bytes]]:
    """The byte strings that spell the value in the files the workbook writes (lower case; searched in lowered bytes)."""
    needles = [("text", value.lower().encode("utf-8"))]
    escaped = json.dumps(value.lower())[1:-1].encode("ascii")
    if escaped != needles[0][1]:
        needles.append(("text (JSON-escaped)", escaped))
    return needles


def index_terms(value: str) -> list[str]:
    """The words of the value an FTS5 index keeps as terms (unicode61 tokens, lower case), 3 characters or longer."""
    return [w for w in dict.fromkeys(re.findall(r"\w+", value.lower())) if len(w) >= 3]


def _offsets(haystack: bytes, needle: bytes) -> list[int]:
    found, start = [], haystack.find(needle)
    while start != -1:
        found.append(start)
        start = haystack.find(needle, start + 1)
    return found


def _json_paths(data: Any, value: str, path: str = "") -> list[str]:
    """The JSON paths of every string (key or value) that contains the value, in document order."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, item in data.items():
            here = f"{path}.{key}" if path else str(key)
            if value in str(key).lower():
                found.append(f"{here} (key)")
            found += _json_paths(item, value, here)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found += _json_paths(item, value, f"{path}[{index}]")
    elif isinstance(data, str):
        found += [path or "(the document)"] * data.lower().count(value)
    return found


class _SqliteFile:
    """Page ownership of one SQLite file, read through a read-only connection (sqlite's dbstat table)."""

    def __init__(self, path: Path, raw: bytes, value: str) -> None:
        self.page_size = int.from_bytes(raw[16:18], "big") or 65536
        self.owner: dict[int, str] = {}
        self.table_of: dict[str, str] = {}
        self.live: set[str] = set()
        self.fts_tables: list[str] = []
        self._db = None
        # The same SQLite library as the stores (vector_store picks it): SQLite tracks the locks of all its connections
        # in one process, so opening and closing this read-only one cannot drop a lock a store's connection holds.
        from .vector_store import _sqlite_module

        module = _sqlite_module()
        self._error = module.Error
        try:
            db = module.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        except module.Error:
            return
        try:
            self.owner = dict((page, name) for name, page in db.execute("SELECT name, pageno FROM dbstat"))
            schema = db.execute("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_schema").fetchall()
            self.table_of = {name: table for _, name, table, _, _ in schema}
            self.fts_tables = [name for kind, name, _, _, sql in schema
                               if kind == "table" and sql and re.search(r"using\s+fts5", sql, re.IGNORECASE)]
            for kind, name, _, rootpage, _ in schema:
                if kind == "table" and rootpage:  # a real table (virtual tables keep their rows in shadow tables)
                    columns = [row[1] for row in db.execute(f'PRAGMA table_info("{name}")')]
                    test = " OR ".join(f'instr(lower(CAST("{c}" AS TEXT)), ?) > 0' for c in columns)
                    if test and db.execute(f'SELECT count(*) FROM "{name}" WHERE {test}', [value] * len(columns)).fetchone()[0]:
                        self.live.add(name)
            self._db = db
        except module.Error:
            db.close()
            return

    def page(self, offset: int) -> str:
        """The page holding a byte and the table or index that owns it."""
        page = offset // self.page_size + 1
        return f"page {page} ({self.owner.get(page) or 'a free page'})"

    def where(self, offset: int) -> str:
        """The page holding a byte, its owner, and whether a live row of that table holds the value."""
        page = offset // self.page_size + 1
        owner = self.owner.get(page)
        if not owner:
            return f"page {page}: a free page (no table owns it)"
        table = self.table_of.get(owner, owner)
        if owner.startswith("sqlite_") and owner not in self.table_of:
            return f"page {page} ({owner})"
        if table in self.live:
            return f"page {page} ({owner}): a live row"
        return f"page {page} ({owner}): no live row; bytes left in the page"

    def live_term(self, table: str, term: str) -> bool:
        """Whether a live row of the FTS5 table still has the term (so its bytes in the index are not a leftover)."""
        try:
            return self._db.execute(f'SELECT count(*) FROM "{table}" WHERE "{table}" MATCH ?', (f'"{term}"',)).fetchone()[0] > 0
        except self._error:
            return True  # cannot tell (e.g. a tokenizer this sqlite lacks): do not claim a leftover

    def close(self) -> None:
        if getattr(self, "_db", None) is not None:
            self._db.close()


def _files(root: Path) -> list[Path]:
    """Every regular file under root, symbolic links not followed, in a stable order."""
    found = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        found += [Path(folder) / n for n in sorted(names) if not (Path(folder) / n).is_symlink()]
    return found


def scan(
    root: str | os.PathLike,
    value: str,
    *,
    sentence: str | None = None,
    embedder: Any = None,
    user: str | None = None,
    memory_files: Sequence[str] = ("memory.db",),
) -> ScanReport:
    """Every place under `root` where `value` (the fact's text) or its embedding still appears.

    `sentence` is the memory the fact was stored as (e.g. "The user's home address is 12 Harbour Lane."); with an
    `embedder` its embedding is searched for as bytes, and the nearest memory of `user` in each of `memory_files`
    (names of SQLite memory-store files under root) is checked by cosine.
    """
    root = Path(root)
    if not value or not value.strip():
        raise ValueError("scan needs the fact's text to look for; got an empty value.")
    lowered_value = value.lower()
    needles = text_needles(value)
    vector_bytes = b""
    fact_vector = None
    if embedder is not None and sentence:
        fact_vector = np.asarray(embedder.embed([sentence])[0], dtype=np.float32)
        vector_bytes = fact_vector.tobytes()[:EMBEDDING_PREFIX]
    places: list[Place] = []
    total = 0
    files = _files(root) if root.exists() else []
    name_needles = {lowered_value, slug(value)} - {""}
    for path in files:
        relative = path.relative_to(root).as_posix()
        if any(n in relative.lower() for n in name_needles):
            places.append(Place(relative, "file name", "text in a file or folder name"))
        raw = path.read_bytes()
        total += len(raw)
        lowered = raw.lower()
        sqlite_file = _SqliteFile(path, raw, lowered_value) if raw.startswith(SQLITE_HEADER) else None
        json_paths: list[str] = []
        if path.suffix == ".json":
            try:
                json_paths = _json_paths(json.loads(raw.decode("utf-8")), lowered_value)
            except (ValueError, UnicodeDecodeError):
                json_paths = []
        hits = sorted((offset, label) for label, needle in needles for offset in _offsets(lowered, needle))
        for number, (offset, label) in enumerate(hits):
            if sqlite_file is not None:
                where = sqlite_file.where(offset)
            elif path.suffix == ".json" and len(json_paths) == len(hits):
                where = json_paths[number]
            elif path.suffix == ".md":
                where = f"line {raw.count(NEWLINE, 0, offset) + 1}"
            elif path.name.endswith(("-journal", "-wal")):
                where = "SQLite " + ("rollback journal" if path.name.endswith("-journal") else "write-ahead log")
            else:
                where = "bytes"
            places.append(Place(relative, where, label, offset))
        if vector_bytes:
            for offset in _offsets(raw, vector_bytes):
                where = sqlite_file.page(offset) if sqlite_file else "bytes"
                places.append(Place(relative, where, "the fact's embedding (float32 bytes)", offset))
        if sqlite_file is not None:
            for table in sqlite_file.fts_tables:
                pages = {p for p, name in sqlite_file.owner.items() if name == f"{table}_data"}
                for term in index_terms(value):
                    if sqlite_file.live_term(table, term):
                        continue
                    for offset in _offsets(lowered, term.encode("utf-8")):
                        if offset // sqlite_file.page_size + 1 in pages:
                            page = offset // sqlite_file.page_size + 1
                            places.append(Place(relative, f"page {page} ({table}_data): an FTS5 index segment",
                                                f"index term {term!r} that no live row has", offset))
            sqlite_file.close()
    nearest = None
    if fact_vector is not None:
        for path in files:
            if path.name in memory_files and path.read_bytes()[:16] == SQLITE_HEADER:
                nearest = nearest_memory(path, fact_vector, user)
                if nearest and (lowered_value in nearest["content"].lower() or nearest["cosine"] >= NEAR):
                    places.append(Place(path.relative_to(root).as_posix(), f"row {nearest['id']}: {nearest['content']!r}",
                                        f"nearest memory to the fact (cosine {nearest['cosine']:.3f})"))
    return ScanReport(places, len(files), total, nearest)


def nearest_memory(path: str | os.PathLike, vector: np.ndarray, user: str | None = None) -> dict[str, Any] | None:
    """The memory (of `user`, if given) whose stored embedding is nearest to `vector`, read-only, with its cosine."""
    import sqlite_vec

    from .vector_store import _sqlite_module

    db = _sqlite_module().connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        db.enable_load_extension(True)
        sqlite_vec.load(db)
        rows = db.execute("SELECT m.id, m.content, m.metadata, v.embedding FROM memories m "
                          "JOIN memory_vectors v ON v.rowid = m.id").fetchall()
    finally:
        db.close()
    best = None
    for memory_id, content, metadata, embedding in rows:
        if user is not None and json.loads(metadata or "{}").get("user") != user:
            continue
        stored = np.frombuffer(embedding, dtype=np.float32)
        cosine = float(stored @ vector / ((np.linalg.norm(stored) * np.linalg.norm(vector)) or 1.0))
        if best is None or cosine > best["cosine"]:
            best = {"id": memory_id, "content": content, "cosine": round(cosine, 4)}
    return best
