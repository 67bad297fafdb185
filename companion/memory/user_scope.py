"""One user's view of a shared vector store: writes are stamped with the user, searches see only that user's rows.

`UserScopedVectors` implements the SDK's `strands.memory.MemoryStore` protocol over a `SqliteVecMemoryStore` file
that several users share (notebook 09): `add` stores the memory with `{"user": ...}` in its metadata and the user in
its lineage record, and `search` ranks only the rows that belong to this user. The store itself has no user column;
the scope lives here.

The store keeps each text once, so a sentence two users both said (both extracted "The user's favorite color is
green.") is one row: the first writer's user and lineage are the row's own, the second's lineage goes to
`metadata["restated_in"]` with that user in it. A row belongs to every user it names (`row_users`): each of them sees
it, with their own lineage.
"""

from __future__ import annotations

import json
from typing import Any

from strands.memory import MemoryEntry

from companion.memory.lineage import LINEAGE_KEY
from companion.memory.vector_store import SqliteVecMemoryStore, connect, lineage_of_user, row_users, with_lineage


def _metadata(path: str) -> dict[str, dict[str, Any]]:
    db, _ = connect(path)
    try:
        rows = db.execute("SELECT id, metadata FROM memories").fetchall()
    finally:
        db.close()
    return {str(i): json.loads(m or "{}") for i, m in rows}


def owners(path: str) -> dict[str, str | None]:
    """Every memory id in a store file with the user its metadata names first (its first writer; None: none).
    A row two users derived belongs to both: `users` lists them."""
    return {i: meta.get("user") for i, meta in _metadata(path).items()}


def users(path: str) -> dict[str, list[str]]:
    """Every memory id in a store file with every user it belongs to (`row_users`: first writer first)."""
    return {i: row_users(meta) for i, meta in _metadata(path).items()}


class UserScopedVectors:
    """A MemoryStore over a shared `SqliteVecMemoryStore`: one user's memories only."""

    def __init__(self, store: SqliteVecMemoryStore, user: str, *, name: str = "vectors", extraction: Any = None,
                 max_search_results: int = 5) -> None:
        self.store = store
        self.user = user
        self.name = name
        self.description = f"Facts about the user {user}, searched by meaning."
        self.max_search_results = max_search_results
        self.writable = True
        self.extraction = extraction

    def _mine(self) -> dict[str, dict[str, Any]]:
        """This user's rows: id -> metadata, read from the file."""
        return {i: meta for i, meta in _metadata(self.store.path).items() if self.user in row_users(meta)}

    def rows(self) -> list[tuple[str, str]]:
        """(id, content) of this user's memories (those another user derived too included), read from the file."""
        mine = self._mine()
        return [(i, c) for i, c, _ in self.store.all() if i in mine]

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """Store one memory stamped with this user, in the metadata and in its lineage record (the lineage given, else
        the one a `Lineage` hook announced for an add_memory entry, else "add": see `SqliteVecMemoryStore.add`)."""
        given = with_lineage(content, metadata)
        given[LINEAGE_KEY] = {**given[LINEAGE_KEY], "user": self.user}
        return self.store.put(content, {**given, "user": self.user}).id

    async def search(self, query: str, options: dict[str, Any] | None = None) -> list[MemoryEntry]:
        """This user's nearest memories, best first (every row is ranked, then the other users' are dropped), each
        with its score, its id and the lineage the row records for this user."""
        k = (options or {}).get("max_search_results") or self.max_search_results
        total = self.store.count()
        if not total:
            return []
        mine = self._mine()
        hits = [h for h in self.store.search_vectors(query, total) if h.id in mine][:k]
        entries = []
        for hit in hits:
            origin = lineage_of_user(mine[hit.id], self.user)
            entries.append(MemoryEntry(content=hit.content, metadata={
                "score": hit.score, "id": hit.id, **({LINEAGE_KEY: origin} if origin else {})}))
        return entries
