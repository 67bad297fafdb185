"""The vector store keeps each row's lineage (the SDK metadata `add` receives), returns it with search results, and
records where a memory was derived again."""

from __future__ import annotations

import asyncio

import pytest

from companion.memory.lineage import LineageRecord
from companion.memory.vector_store import SqliteVecMemoryStore
from companion.models.embeddings import make_embedder


@pytest.fixture(scope="module")
def embedder():
    return make_embedder("minilm")


def test_rows_keep_their_lineage_and_search_returns_it(tmp_path, embedder):
    first = LineageRecord("extraction", "ada-chat", (0, 1)).to_dict()
    again = LineageRecord("extraction", "ada-chat", (10, 11)).to_dict()
    with SqliteVecMemoryStore(tmp_path / "memory.db", embedder) as store:
        memory_id = asyncio.run(store.add("The user's team is payments.", {"user": "ada", "lineage": first}))
        assert asyncio.run(store.add("The user's team is payments.", {"user": "ada", "lineage": again})) == memory_id
        asyncio.run(store.add("The user's team is payments.", {"user": "ada", "lineage": again}))  # once is enough
        store.put("A memory written by code.")
        (_, _, meta), (_, _, plain) = store.records()
        assert meta == {"user": "ada", "lineage": first, "restated_in": [again]} and plain == {}
        hits = asyncio.run(store.search("team"))
        assert hits[0].metadata["lineage"] == first and "lineage" not in hits[1].metadata
