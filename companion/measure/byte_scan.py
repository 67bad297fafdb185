"""The proof that a fact is gone: read every byte under a folder and report every place the fact still appears.

`scan(root, value, ...)` reads each file under `root` (or the one file `root` names) as raw bytes (nothing is asked
of the stores, so a SQLite file's free pages, a journal or a WAL file are read like any other bytes) and looks for:

- the fact's text, matched independently of how forget() matches it: both the value and the bytes are normalised
  (Unicode NFKC, case folded, every run of whitespace one space), in UTF-8 and as JSON escapes non-ASCII characters;
- the fact's text in a file or folder name (FileMemoryStore names a file after a memory's first line);
- the fact's embedding: the first 64 bytes of the float32 vector of the fact's sentence, as a vector store keeps it;
- index terms: a word of the value that no live row of a SQLite FTS5 table contains any more, yet whose bytes are
  still in that table's index pages (FTS5 keeps a deleted document's terms until its segments are merged);
- the nearest memory: the user's memory whose embedding is nearest to the fact's, read through SQL from a
  memory-store file (`memories` + sqlite-vec `memory_vectors`); it is a place of its own only when its text is not
  already found above and its cosine is `NEAR` or more (the fact said another way), so no place is counted twice.

Each finding is a `Place` that says which file, where in it (JSON path, markdown line, SQLite page and the table
that owns the page, or "free page") and what was found. The scan only reads: SQLite files are opened read-only.
What it cannot read: files that no longer exist (a deleted journal, the old version of a file replaced by a rename)
and the disk blocks they leave behind.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


def _row_users(metadata: dict[str, Any]) -> set[str]:
    """The users a memory row belongs to, read from its metadata here (not through the store's code): the row's user
    and the user each of its lineages names (a text two users said is one row, theirs both)."""
    records = [metadata.get("lineage"), *(metadata.get("restated_in") or [])]
    named = [metadata.get("user"), *(r.get("user") for r in records if isinstance(r, dict))]
    return {u for u in named if isinstance(u, str) and u}


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
        """One dict per place, for `companion.support.display.table`."""
        return [{"file": p.file, "where": p.where, "found": p.found} for p in self.places]


def slug(text: str) -> str:
    """The kebab-case form FileMemoryStore gives a file name (lower case, letters and digits, '-' between words)."""
    text = re.sub(r"[^a-z0-9\s-]", "", text.lower()).strip()
    return re.sub(r"\s+", "-", text)


def normalise(text: str) -> str:
    """The form both the value and the scanned text are compared in: NFKC, case folded, whitespace runs one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold())


def _folded_bytes(raw: bytes) -> str:
    """A file's bytes as normalised text (bytes that are not UTF-8 become U+FFFD, so binary pages never match)."""
    return normalise(raw.decode("utf-8", errors="replace"))


def _text_forms(value: str) -> list[tuple[str, str]]:
    """The normalised value, and the form JSON gives it with non-ASCII characters escaped (when that differs)."""
    plain = normalise(value)
    forms = [("text", plain)]
    escaped = json.dumps(plain)[1:-1]
    if escaped != plain:
        forms.append(("text (JSON-escaped)", escaped.casefold()))
    return forms


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


def _term_bytes(term: str) -> list[bytes]:
    """A term as it may sit in an index: as written, NFKC-folded, and without diacritics (remove_diacritics 2)."""
    folded = normalise(term)
    bare = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
    return [t.encode("utf-8") for t in dict.fromkeys([term, folded, bare])]


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
            found += [f"{here} (key)"] * normalise(str(key)).count(value)
            found += _json_paths(item, value, here)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found += _json_paths(item, value, f"{path}[{index}]")
    elif isinstance(data, str):
        found += [path or "(the document)"] * normalise(data).count(value)
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
        from companion.memory.vector_store import _sqlite_module

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
                    for row in db.execute(f'SELECT * FROM "{name}"'):
                        cells = [c.decode("utf-8", "replace") if isinstance(c, bytes) else str(c) for c in row]
                        if any(value in normalise(c) for c in cells):
                            self.live.add(name)
                            break
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


def _segments(path: Path, raw: bytes, sqlite_file: _SqliteFile | None, value: str) -> list[tuple[str, str, int]]:
    """The parts of a file searched one by one, as (where, normalised text, byte offset of the part): a SQLite file's
    pages, a JSON file's strings (with their paths), a text file's lines, or else the whole file."""
    if sqlite_file is not None:
        size = sqlite_file.page_size
        return [(sqlite_file.where(start), _folded_bytes(raw[start:start + size]), start)
                for start in range(0, len(raw), size)]
    if path.suffix == ".json":
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            data = None
        if data is not None:
            return [(where, value, 0) for where in _json_paths(data, value)]
    if path.name.endswith(("-journal", "-wal")):
        label = "SQLite " + ("rollback journal" if path.name.endswith("-journal") else "write-ahead log")
        return [(label, _folded_bytes(raw), 0)]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return [("bytes", _folded_bytes(raw), 0)]
    offsets, lines = [0], text.split("\n")
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len((line + "\n").encode("utf-8")))
    return [(f"line {number}", normalise(line), offset) for number, (line, offset) in enumerate(zip(lines, offsets), 1)]


def _files(root: Path) -> list[Path]:
    """Every regular file under root (or root itself, if it is a file), symbolic links not followed, in a stable order."""
    if root.is_file() and not root.is_symlink():
        return [root]
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
    """Every place under `root` (a folder, or one file) where `value` (the fact's text) or its embedding appears.

    `sentence` is the memory the fact was stored as (e.g. "The user's home address is 12 Harbour Lane."); with an
    `embedder` its embedding is searched for as bytes, and the nearest memory of `user` in each of `memory_files`
    (names of SQLite memory-store files under root) is checked by cosine.
    """
    root = Path(root)
    if not value or not value.strip():
        raise ValueError("scan needs the fact's text to look for; got an empty value.")
    wanted = normalise(value).strip()
    forms = _text_forms(wanted)
    vector_bytes = b""
    fact_vector = None
    if embedder is not None and sentence:
        fact_vector = np.asarray(embedder.embed([sentence])[0], dtype=np.float32)
        vector_bytes = fact_vector.tobytes()[:EMBEDDING_PREFIX]
    places: list[Place] = []
    total = 0
    files = _files(root) if root.exists() else []
    base = root.parent if root.is_file() else root
    name_needles = {wanted, slug(value)} - {""}
    for path in files:
        relative = path.relative_to(base).as_posix()
        if any(n in normalise(relative) for n in name_needles):
            places.append(Place(relative, "file name", "text in a file or folder name"))
        raw = path.read_bytes()
        total += len(raw)
        lowered = raw.lower()
        sqlite_file = _SqliteFile(path, raw, wanted) if raw.startswith(SQLITE_HEADER) else None
        found_here = 0
        for where, text, start in _segments(path, raw, sqlite_file, wanted):
            for label, form in forms:
                hits = text.count(form)
                if not hits:
                    continue
                page = lowered[start:start + sqlite_file.page_size] if sqlite_file else b""
                raw_offsets = [start + o for o in _offsets(page, form.encode("utf-8"))]
                for number in range(hits):
                    offset = raw_offsets[number] if number < len(raw_offsets) else (start if sqlite_file else None)
                    places.append(Place(relative, where, label, offset))
                found_here += hits
        whole = _folded_bytes(raw)  # a second count over the whole file: a match across a page or line boundary
        across = sum(whole.count(form) for _, form in forms) - found_here
        if path.suffix != ".json":
            places += [Place(relative, "across a page or line boundary", "text")] * max(across, 0)
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
                    offsets = sorted({o for form in _term_bytes(term) for o in _offsets(lowered, form)})
                    for offset in offsets:
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
                # A row whose text holds the value is already among the places above (its page); only a memory
                # that says the fact another way (close by meaning, no matching text) is a place of its own.
                if nearest and wanted not in normalise(nearest["content"]) and nearest["cosine"] >= NEAR:
                    places.append(Place(path.relative_to(base).as_posix(), f"row {nearest['id']}: {nearest['content']!r}",
                                        f"nearest memory to the fact (cosine {nearest['cosine']:.3f})"))
    return ScanReport(places, len(files), total, nearest)


def nearest_memory(path: str | os.PathLike, vector: np.ndarray, user: str | None = None) -> dict[str, Any] | None:
    """The memory (of `user`, if given) whose stored embedding is nearest to `vector`, read-only, with its cosine."""
    import sqlite_vec

    from companion.memory.vector_store import _sqlite_module

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
        if user is not None and user not in _row_users(json.loads(metadata or "{}")):
            continue
        stored = np.frombuffer(embedding, dtype=np.float32)
        cosine = float(stored @ vector / ((np.linalg.norm(stored) * np.linalg.norm(vector)) or 1.0))
        if best is None or cosine > best["cosine"]:
            best = {"id": memory_id, "content": content, "cosine": round(cosine, 4)}
    return best
