"""One SQLite memory store shared by users (notebook 09): a text two users both said is kept once (UNIQUE content),
and belongs to both. Each user's scope sees it with that user's own lineage, and forgetting one user's fact takes
only that user's lineage off the row; the row (with its vector and FTS5 entry) goes when no lineage is left.

Before the fix the row named only its first writer: the second user's scoped search and `rows()` did not see it, and
forget() of the first user's fact deleted the row the second user had derived too."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from strands import Agent
from strands.memory import InvocationTrigger, MemoryManager, ModelExtractor
from strands.session import FileSessionManager

from companion import OfflineModel
from companion.measure.forgetting import Stores, fact_counts, forget, known_users
from companion.memory.lineage import Lineage, LineageExtractor, LineageRecord
from companion.memory.user_scope import UserScopedVectors
from companion.memory.vector_store import SqliteVecMemoryStore, connect
from companion.models.embeddings import make_embedder

SHARED = "The user's favorite color is green."
KEY = "favourite colour"
TEAMS = {"ada": "payments", "sam": "search"}


@pytest.fixture(scope="module")
def embedder():
    return make_embedder("minilm")


def plant(root: Path, embedder, order=("ada", "sam")) -> Stores:
    """Both users say the same colour (extracted as the same text) and a team of their own, in their own sessions."""
    stores = Stores.under(root)
    stores.markdown.mkdir(parents=True)
    store = SqliteVecMemoryStore(stores.vectors, embedder)
    for name in order:
        extraction = {"trigger": InvocationTrigger(), "extractor": LineageExtractor(ModelExtractor())}
        sessions = FileSessionManager(session_id=f"{name}-chat", storage_dir=str(stores.sessions))
        agent = Agent(model=OfflineModel(), session_manager=sessions, state={"user_id": name}, callback_handler=None,
                      memory_manager=MemoryManager(stores=[UserScopedVectors(store, name, extraction=extraction)],
                                                   search_tool_config=False, injection=False),
                      hooks=[Lineage(sessions)])
        agent("My favourite colour is green.")
        agent(f"My team is {TEAMS[name]}.")
    store.close()
    return stores


@pytest.fixture(scope="module")
def planted(tmp_path_factory, embedder) -> Path:
    return plant(tmp_path_factory.mktemp("shared") / "stores", embedder).root


@pytest.fixture
def stores(planted, tmp_path) -> Stores:
    return Stores.under(shutil.copytree(planted, tmp_path / "stores"))


def table_rows(stores: Stores) -> dict[str, int]:
    """Rows of the shared text in each of the three tables, counted with SQL."""
    db, _ = connect(stores.vectors)
    try:
        (rowid,) = db.execute("SELECT id FROM memories WHERE content = ?", (SHARED,)).fetchone() or (None,)
        return {
            "memories": db.execute("SELECT count(*) FROM memories WHERE content = ?", (SHARED,)).fetchone()[0],
            "memory_vectors": db.execute("SELECT count(*) FROM memory_vectors WHERE rowid = ?", (rowid,)).fetchone()[0],
            "memory_keywords": db.execute("SELECT count(*) FROM memory_keywords WHERE memory_keywords MATCH 'green'"
                                          ).fetchone()[0],
        }
    finally:
        db.close()


def shared_metadata(stores: Stores) -> dict:
    db, _ = connect(stores.vectors)
    try:
        (raw,) = db.execute("SELECT metadata FROM memories WHERE content = ?", (SHARED,)).fetchone()
    finally:
        db.close()
    return json.loads(raw)


def scoped(stores: Stores, embedder, name: str):
    """(rows, search hits for the colour) of one user's scope."""
    with SqliteVecMemoryStore(stores.vectors, embedder) as store:
        view = UserScopedVectors(store, name)
        return [c for _, c in view.rows()], asyncio.run(view.search("What colour does the user like?"))


def test_the_shared_text_is_one_row_in_both_users_scopes(stores, embedder):
    assert table_rows(stores) == {"memories": 1, "memory_vectors": 1, "memory_keywords": 1}
    for name in ("ada", "sam"):
        rows, hits = scoped(stores, embedder, name)
        assert SHARED in rows, f"{name}'s own memory is in {name}'s rows"
        assert hits[0].content == SHARED, f"{name}'s search finds {name}'s own memory first"
        assert hits[0].metadata["lineage"]["session_id"] == f"{name}-chat", "with the lineage of that user"
        assert hits[0].metadata["lineage"]["user"] == name
    from companion.memory.vector_store import row_users

    assert row_users(shared_metadata(stores)) == ["ada", "sam"]


def test_every_lineage_record_names_its_user(stores):
    meta = shared_metadata(stores)
    assert meta["lineage"]["user"] == "ada" and [r["user"] for r in meta["restated_in"]] == ["sam"]


def test_forgetting_one_users_fact_keeps_the_row_the_other_user_derived(stores, embedder):
    ada_ids = shared_metadata(stores)["lineage"]["message_ids"]
    forget(stores, KEY, user="ada")
    assert not any(i.encode() in stores.vectors.read_bytes() for i in ada_ids), "no old copy of ada's lineage"
    assert table_rows(stores) == {"memories": 1, "memory_vectors": 1, "memory_keywords": 1}, "sam's row stays"
    meta = shared_metadata(stores)
    assert meta["user"] == "sam" and meta["lineage"]["session_id"] == "sam-chat", "sam's lineage is now the row's"
    assert "restated_in" not in meta and "ada-chat" not in json.dumps(meta), "nothing of ada's left on the row"
    assert SHARED not in scoped(stores, embedder, "ada")[0]
    rows, hits = scoped(stores, embedder, "sam")
    assert SHARED in rows and hits[0].content == SHARED and hits[0].metadata["lineage"]["user"] == "sam"
    assert fact_counts(stores, "sam", [("favorite color", "green")])["vector store"] == 1
    assert fact_counts(stores, "ada", [("favorite color", "green")])["vector store"] == 0


def test_the_row_goes_with_its_last_lineage(stores):
    forget(stores, KEY, user="ada")
    forget(stores, KEY, user="sam")
    assert table_rows(stores) == {"memories": 0, "memory_vectors": 0, "memory_keywords": 0}


def test_forgetting_the_second_writers_fact_keeps_the_first_writers_row(tmp_path, embedder):
    stores = plant(tmp_path / "stores", embedder, order=("sam", "ada"))
    assert shared_metadata(stores)["user"] == "sam"
    forget(stores, KEY, user="ada")
    meta = shared_metadata(stores)
    assert meta["user"] == "sam" and "restated_in" not in meta and "ada" not in json.dumps(meta)
    assert table_rows(stores)["memory_vectors"] == 1


def test_forgetting_for_every_user_deletes_the_shared_row(stores):
    forget(stores, KEY, user=None)
    assert table_rows(stores) == {"memories": 0, "memory_vectors": 0, "memory_keywords": 0}


def test_a_user_known_only_by_a_shared_row_is_known(tmp_path, embedder):
    stores = Stores.under(tmp_path)
    stores.sessions.mkdir(), stores.markdown.mkdir()
    with SqliteVecMemoryStore(stores.vectors, embedder) as store:
        asyncio.run(UserScopedVectors(store, "ada").add(SHARED, {"lineage": LineageRecord("extraction", "a", (0,))
                                                                 .to_dict()}))
        asyncio.run(UserScopedVectors(store, "sam").add(SHARED))
        assert [c for _, c in UserScopedVectors(store, "sam").rows()] == [SHARED]
    assert known_users(stores) == ["ada", "sam"]


def test_the_checks_of_notebook_09_see_a_shared_row_as_the_second_writers_too(stores, embedder):
    """The byte scan's nearest memory and the paraphrase check read a row's users from its metadata: the row ada wrote
    first is sam's as well, so both checks find sam's colour there (before, they looked only at the first writer)."""
    from companion.measure.byte_scan import scan
    from companion.measure.paraphrase_check import paraphrases

    found = paraphrases(stores.root, "green", embedder=embedder, user="sam")
    assert any(p.text == SHARED for p in found.places), found.rows()
    nearest = scan(stores.vectors, "green", sentence=SHARED, embedder=embedder, user="sam").nearest
    assert nearest and nearest["content"] == SHARED
    assert not any(p.text == SHARED for p in paraphrases(stores.root, "green", embedder=embedder, user="lin").places)
