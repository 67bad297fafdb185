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
        mine = {"user": "ada"}  # each lineage record names whose memory it is
        assert meta == {"user": "ada", "lineage": {**first, **mine}, "restated_in": [{**again, **mine}]}
        assert plain == {}
        hits = asyncio.run(store.search("team"))
        assert hits[0].metadata["lineage"] == {**first, **mine} and "lineage" not in hits[1].metadata


def test_a_scoped_search_returns_the_users_own_lineage(tmp_path, embedder):
    """UserScopedVectors.search returned only the score and id: a hit did not say where it came from."""
    from companion.memory.user_scope import UserScopedVectors

    ada_said = LineageRecord("extraction", "ada-chat", (0, 1)).to_dict()
    sam_said = LineageRecord("extraction", "sam-chat", (4, 5)).to_dict()
    with SqliteVecMemoryStore(tmp_path / "memory.db", embedder) as store:
        asyncio.run(UserScopedVectors(store, "ada").add("The user's team is payments.", {"lineage": ada_said}))
        asyncio.run(UserScopedVectors(store, "sam").add("The user's team is payments.", {"lineage": sam_said}))
        for name, said in (("ada", ada_said), ("sam", sam_said)):
            (hit,) = asyncio.run(UserScopedVectors(store, name).search("team"))
            assert hit.metadata["lineage"] == {**said, "user": name}
            assert set(hit.metadata) == {"score", "id", "lineage"}


def test_a_memory_the_agent_stores_with_its_add_tool_records_the_turn(tmp_path, embedder):
    """Notebook 06's session 1: the SDK's add_memory tool hands `add` no metadata; with a Lineage hook on the agent
    the row records the tool call: the session, the user's message and the assistant's request, and the toolUse."""
    from strands import Agent
    from strands.memory import MemoryManager
    from strands.session import FileSessionManager

    from companion import OfflineModel
    from companion.memory.lineage import Lineage

    with SqliteVecMemoryStore(tmp_path / "memory.db", embedder) as store:
        sessions = FileSessionManager(session_id="monday-chat", storage_dir=str(tmp_path / "sessions"))
        writer = Agent(model=OfflineModel(), session_manager=sessions, callback_handler=None, hooks=[Lineage(sessions)],
                       memory_manager=MemoryManager(stores=[store], search_tool_config=False, add_tool_config=True,
                                                    injection=False))
        writer("Please remember that I prefer deployments to happen on Tuesday mornings.")
        (_, content, meta), = store.records()
    tool_use = next(b["toolUse"] for m in writer.messages for b in m["content"] if "toolUse" in b)
    assert meta["lineage"]["derived"] == "tool call" and meta["lineage"]["session_id"] == "monday-chat"
    assert meta["lineage"]["messages"] == [0, 1] and meta["lineage"]["tool_use_id"] == tool_use["toolUseId"]
    assert meta["lineage"]["message_ids"] == [m["tracking_id"] for m in writer.messages[:2]]


def test_an_add_without_lineage_says_so(tmp_path, embedder):
    with SqliteVecMemoryStore(tmp_path / "memory.db", embedder) as store:
        asyncio.run(store.add("The user drinks only decaf coffee."))
        (_, _, meta), = store.records()
    assert meta == {"lineage": {"derived": "add", "session_id": None, "messages": []}}
