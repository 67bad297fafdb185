"""The paraphrase check (notebook 09): a reworded copy with no byte of the value is found by meaning or by its words in
any order; another fact of the same user, and the other user's data, are not."""

from __future__ import annotations

import json

import pytest

from companion.measure.byte_scan import scan
from companion.measure.paraphrase_check import paraphrases, value_words
from companion.memory.vector_store import SqliteVecMemoryStore
from companion.models.embeddings import make_embedder


@pytest.fixture(scope="module")
def embedder():
    return make_embedder("minilm")


def test_a_reworded_copy_is_found_where_no_byte_matches(tmp_path, embedder):
    (tmp_path / "memory" / "ada").mkdir(parents=True)
    (tmp_path / "memory" / "ada" / "notes.md").write_text(
        "- Lives on Harbour Lane, no. 12. <!-- lineage {} -->\n- My favourite pub is the Harbour Inn.\n")
    (tmp_path / "memory" / "grace").mkdir()
    (tmp_path / "memory" / "grace" / "notes.md").write_text("- Lives on Harbour Lane, no. 12.\n")
    assert scan(tmp_path, "12 Harbour Lane").places == []
    found = paraphrases(tmp_path, "12 Harbour Lane", embedder=embedder, user="ada").places
    assert [(p.file, p.text) for p in found] == [("memory/ada/notes.md", "- Lives on Harbour Lane, no. 12.")]
    assert "FTS5" in found[0].how and "cosine" in found[0].how


def test_the_store_is_asked_through_its_own_indexes_and_scoped_by_user(tmp_path, embedder):
    store = SqliteVecMemoryStore(tmp_path / "memory.db", embedder)
    store.put("Lives on Harbour Lane, no. 12.", {"user": "ada"})
    store.put("The user's favorite pub is the Harbour Inn.", {"user": "ada"})
    store.put("Harbour Lane 12 is where grace's friend lives.", {"user": "grace"})
    store.close()
    report = paraphrases(tmp_path, "12 Harbour Lane", embedder=embedder, user="ada")
    assert [(p.where, p.text) for p in report.places] == [("row 1 of memories", "Lives on Harbour Lane, no. 12.")]
    assert report.store_rows == 2
    everyone = paraphrases(tmp_path, "12 Harbour Lane", embedder=embedder)
    assert len(everyone.places) == 2


def test_session_files_of_another_user_are_not_searched(tmp_path, embedder):
    for name in ("ada", "grace"):
        agent = tmp_path / f"session_{name}-chat" / "agents" / "agent_default"
        (agent / "messages").mkdir(parents=True)
        (agent / "agent.json").write_text(json.dumps({"state": {"user_id": name}}))
        (agent / "messages" / "message_0.json").write_text(json.dumps(
            {"message": {"role": "user", "content": [{"text": "My home address is 12 Harbour Lane."}]}}))
    found = paraphrases(tmp_path, "12 Harbour Lane", embedder=embedder, user="ada").places
    assert [p.file.split("/")[0] for p in found] == ["session_ada-chat"]


def test_value_words_and_an_empty_value():
    assert value_words("555-0142") == ["555", "0142"]
    with pytest.raises(ValueError):
        paraphrases(".", "  -- ", embedder=None)


def test_ids_and_timestamps_are_not_taken_for_a_number_said_another_way(tmp_path, embedder):
    (tmp_path / "agent.json").write_text(json.dumps({
        "tracking_id": "04008f06-7868-4346-96f2-dee1648800a6", "at": "2026-01-05T09:00:00",
        "note": "phone number: 0142, no. 555"}))
    found = paraphrases(tmp_path, "555-0142", embedder=embedder).places
    assert [p.where for p in found] == ["note"]
