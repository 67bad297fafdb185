"""One user's view of a shared vector store: writes are stamped with the user, searches see only that user's rows.

`UserScopedVectors` implements the SDK's `strands.memory.MemoryStore` protocol over a `SqliteVecMemoryStore` file
that several users share (notebook 09): `add` stores the memory with `{"user": ...}` in its metadata, and `search`
ranks only the rows whose metadata names this user. The store itself has no user column; the scope lives here.
"""

from __future__ import annotations

import json
from typing import Any

from strands.memory import MemoryEntry

from companion.memory.vector_store import SqliteVecMemoryStore, connect


def owners(path: str) -> dict[str, str | None]:
    """Every memory id in a store file with the user its metadata names (None when it names none)."""
    db, _ = connect(path)
    try:
        rows = db.execute("SELECT id, metadata FROM memories").fetchall()
    finally:
        db.close()
    return {str(i): json.loads(m or "{}").get("user") for i, m in rows}


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

    def rows(self) -> list[tuple[str, str]]:
        """(id, content) of this user's memories, read from the file."""
        mine = {i for i, u in owners(self.store.path).items() if u == self.user}
        return [(i, c) for i, c, _ in self.store.all() if i in mine]

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """Store one memory stamped with this user."""
        return self.store.put(content, {**(metadata or {}), "user": self.user}).id

    async def search(self, query: str, options: dict[str, Any] | None = None) -> list[MemoryEntry]:
        """This user's nearest memories, best first (every row is ranked, then the other users' are dropped)."""
        k = (options or {}).get("max_search_results") or self.max_search_results
        total = self.store.count()
        if not total:
            return []
        mine = {i for i, u in owners(self.store.path).items() if u == self.user}
        hits = [h for h in self.store.search_vectors(query, total) if h.id in mine][:k]
        return [MemoryEntry(content=h.content, metadata={"score": h.score, "id": h.id}) for h in hits]
