"""The second proof that a fact is gone: search every text store for the fact said in other words.

The byte scan (`byte_scan.scan`) finds the value's own characters, however they are cased, spaced or encoded. A model
or a second writer that words a memory its own way ("Lives on Harbour Lane, no. 12." for "12 Harbour Lane") leaves
no such bytes, so the byte scan cannot see it. `paraphrases(root, value, embedder=..., user=...)` looks for meaning
and for the value's words in any order instead, with neither forget()'s reading of statements nor its matching:

- in a memory-store file (SQLite with `memories`, the sqlite-vec index `memory_vectors` and the FTS5 index
  `memory_keywords`): the store's own indexes are asked, the FTS5 index for rows holding every word of the value (any
  order, any punctuation between them) and the vector index for rows whose embedding has a cosine of `threshold` or
  more with the value's embedding;
- in every other file (session JSON, markdown, text): each string is cut into clauses (at . ! ? before a capital, ; and line breaks), the
  clauses are put in a throw-away in-memory FTS5 table and asked the same question, and each clause is embedded with
  the same embedder and compared with the value's embedding (a clause of one token, such as an id or a timestamp, or
  with no word of letters, by FTS5 only: the embedding model scores strings of digits close to each other).

With `user`, only that user's data is searched: the store rows whose metadata names that user, the sessions whose
agent.json says that user, and `memory/<user>/`; files that belong to no user (or to this one) are searched too.
Another user's value for the same key is not a copy of this one (it may well be near it in meaning).

`threshold` (0.6) was chosen on all-MiniLM-L6-v2: the value "12 Harbour Lane" against "Lives on Harbour Lane, no. 12."
scores about 0.76; against another fact of the same user ("the Harbour Inn" as a favourite pub) about 0.46, against
the question "What is my home address?" about 0.33. A clause found both ways is one place, not two.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from companion.memory.vector_store import _sqlite_module, row_users

SQLITE_HEADER = b"SQLite format 3\x00"
THRESHOLD = 0.6
"""Cosine with the value's embedding from which a clause or row counts as the value said another way."""

_CLAUSE = re.compile(r"(?<=[.!?])\s+(?![a-z0-9])|(?<=;)\s+|\n+")  # "no. 12" stays one clause
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_WORD = re.compile(r"(?<!\w)[^\W\d_]{2,}(?!\w)")
"""A word of two letters or more standing alone (not inside a run like '96f2' or 'dee1648800a6')."""


@dataclass(frozen=True)
class Echo:
    """One place the fact is found in other words (or in its own): a file, where in it, the text, and how it was
    found ("FTS5: every word of the value", "cosine 0.76", or both)."""

    file: str
    where: str
    text: str
    how: str


@dataclass
class ParaphraseReport:
    """What `paraphrases` searched and found."""

    places: list[Echo]
    files: int
    clauses: int
    store_rows: int

    def rows(self) -> list[dict[str, str]]:
        """One dict per place, for `companion.support.display.table`."""
        return [{"file": p.file, "where": p.where, "text": p.text, "found by": p.how} for p in self.places]


def value_words(value: str) -> list[str]:
    """The words of the value as FTS5's unicode61 tokenizer cuts them (letters and digits, lower case)."""
    return list(dict.fromkeys(re.findall(r"\w+", value.lower())))


def _fts_query(value: str) -> str:
    return " AND ".join(f'"{w}"' for w in value_words(value))


def _unit(vector: Any) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    found = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        found += [Path(folder) / n for n in sorted(names) if not (Path(folder) / n).is_symlink()]
    return found


def _session_owner(path: Path, cache: dict[Path, str | None]) -> str | None:
    """The user a session file belongs to (agent.json's state.user_id), or None for a file outside a session."""
    session = next((p for p in [path, *path.parents] if p.name.startswith("session_")), None)
    if session is None:
        return None
    if session not in cache:
        owner = None
        for agent_json in sorted(session.glob("agents/*/agent.json")):
            try:
                owner = json.loads(agent_json.read_text(encoding="utf-8")).get("state", {}).get("user_id")
            except (OSError, ValueError):
                continue
            if owner:
                break
        cache[session] = owner
    return cache[session]


def _markdown_owner(path: Path) -> str | None:
    parts = path.parts
    return parts[parts.index("memory") + 1] if "memory" in parts[:-2] else None


def _strings(data: Any, where: str = "") -> list[tuple[str, str]]:
    """(JSON path, string) of every string value in a JSON document (keys are names, not statements)."""
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in _strings(v, f"{where}.{k}" if where else str(k))]
    if isinstance(data, list):
        return [s for i, v in enumerate(data) for s in _strings(v, f"{where}[{i}]")]
    return [(where or "(the document)", data)] if isinstance(data, str) else []


def _clauses(path: Path, raw: bytes) -> list[tuple[str, str]]:
    """(where, clause) of a text file: JSON strings by path, other text by line, each cut at . ! ? ; and newlines."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return []  # not text (ciphertext, a binary): nothing a reader could take for a statement
    if path.suffix == ".json":
        try:
            pieces = _strings(json.loads(text))
        except ValueError:
            pieces = [("(the document)", text)]
    else:
        pieces = [(f"line {n}", line) for n, line in enumerate(text.split("\n"), 1)]
    pieces = [(where, _COMMENT.sub(" ", piece)) for where, piece in pieces]  # an HTML comment is not prose
    return [(where, c.strip()) for where, piece in pieces for c in _CLAUSE.split(piece) if c.strip()]


def _store_rows(path: Path, value: str, vector: np.ndarray, user: str | None, threshold: float,
                module: Any) -> tuple[list[tuple[str, str, str]], int]:
    """Rows of a memory-store file found by its own FTS5 and vector indexes: (where, text, how), and the rows read."""
    try:
        db = module.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except module.Error:
        return [], 0
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if not {"memories", "memory_vectors", "memory_keywords"} <= tables:
            return [], 0
        import sqlite_vec

        db.enable_load_extension(True)
        sqlite_vec.load(db)
        db.enable_load_extension(False)
        rows = {i: (c, json.loads(m or "{}")) for i, c, m in db.execute("SELECT id, content, metadata FROM memories")}
        mine = {i for i, (_, meta) in rows.items() if user is None or user in (row_users(meta) or [user])}
        how: dict[int, list[str]] = {}
        query = _fts_query(value)
        if query:
            for (rowid,) in db.execute("SELECT rowid FROM memory_keywords WHERE memory_keywords MATCH ?", (query,)):
                how.setdefault(rowid, []).append("FTS5: every word of the value")
        if rows:
            found = db.execute("SELECT rowid, distance FROM memory_vectors WHERE embedding MATCH ? AND k = ?",
                               (vector.astype(np.float32).tobytes(), len(rows))).fetchall()
            for rowid, distance in found:
                if 1.0 - distance >= threshold:
                    how.setdefault(rowid, []).append(f"cosine {1.0 - distance:.2f} (vector index)")
        return [(f"row {i} of memories", rows[i][0], "; ".join(h)) for i, h in sorted(how.items())
                if i in mine and i in rows], len(mine)
    except module.Error:
        return [], 0
    finally:
        db.close()


def paraphrases(root: str | os.PathLike, value: str, *, embedder: Any, user: str | None = None,
                threshold: float = THRESHOLD) -> ParaphraseReport:
    """Every place under `root` (a folder or one file) that holds `value` in other words or in its own: by FTS5 (every
    word of the value, any order) or by embedding (cosine with the value's embedding of `threshold` or more)."""
    root = Path(root)
    if not value_words(value):
        raise ValueError(f"paraphrases needs a value with letters or digits; got {value!r}.")
    module = _sqlite_module()
    vector = _unit(embedder.embed([value])[0])
    base = root.parent if root.is_file() else root
    owners: dict[Path, str | None] = {}
    places: list[Echo] = []
    clauses: list[tuple[str, str, str]] = []  # (file, where, clause)
    files = _files(root) if root.exists() else []
    rows_read = 0
    for path in files:
        relative = path.relative_to(base).as_posix()
        raw = path.read_bytes()
        if raw.startswith(SQLITE_HEADER):
            found, read = _store_rows(path, value, vector, user, threshold, module)
            rows_read += read
            places += [Echo(relative, where, text, how) for where, text, how in found]
            continue
        if user is not None and (_session_owner(path, owners) or user) != user:
            continue
        if user is not None and (_markdown_owner(path.relative_to(base)) or user) != user:
            continue
        clauses += [(relative, where, clause) for where, clause in _clauses(path, raw)]
    if clauses:
        how: dict[int, list[str]] = {}
        index = module.connect(":memory:")
        try:
            index.execute("CREATE VIRTUAL TABLE clauses USING fts5(text, tokenize='unicode61 remove_diacritics 2')")
            index.executemany("INSERT INTO clauses (rowid, text) VALUES (?, ?)",
                              [(n, c) for n, (_, _, c) in enumerate(clauses)])
            for (rowid,) in index.execute("SELECT rowid FROM clauses WHERE clauses MATCH ?", (_fts_query(value),)):
                how.setdefault(rowid, []).append("FTS5: every word of the value")
        finally:
            index.close()
        distinct = list(dict.fromkeys(c for _, _, c in clauses))
        embedded = dict(zip(distinct, (_unit(v) for v in embedder.embed(distinct))))
        for n, (_, _, clause) in enumerate(clauses):
            if " " not in clause or not _WORD.search(clause):
                continue  # one token (an id, a timestamp) or no word: FTS5 only, embeddings score these too close
            cosine = float(embedded[clause] @ vector)
            if cosine >= threshold:
                how.setdefault(n, []).append(f"cosine {cosine:.2f}")
        places += [Echo(clauses[n][0], clauses[n][1], clauses[n][2], "; ".join(h)) for n, h in sorted(how.items())]
    return ParaphraseReport(places, len(files), len(clauses), rows_read)
