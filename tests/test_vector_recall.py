"""Embeddings, the sqlite-vec memory store (bad inputs included) and the recall evaluation."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import shutil
import sqlite3

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from strands import Agent
from strands.memory import ExtractionConfig, InvocationTrigger, MemoryManager, MemoryStore

from companion.measure.recall_eval import content_words, evaluate, load_pairs, main
from companion.memory.vector_store import EmbedderMismatchError, SqliteVecMemoryStore, StoreError, connect
from companion.models.embeddings import TOKENIZER_PATH, EmbeddingModelError, MiniLMEmbedder, TitanEmbedder, make_embedder
from companion.models.offline_model import OfflineModel

DEPLOY = "The user prefers deployments to happen on Tuesday mornings."
QUERY = "when does this user like to ship releases?"
CLUSTER = "The user's production cluster is called atlas-prod in eu-west-1."
PAIRS = "data/recall/paraphrase_pairs.jsonl"


@pytest.fixture(scope="module")
def minilm():
    return MiniLMEmbedder()


@pytest.fixture
def store(minilm, tmp_path):
    with SqliteVecMemoryStore(tmp_path / "memory.db", minilm) as opened:
        yield opened


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- embeddings


def test_minilm_vectors_are_unit_length_and_meaningful(minilm):
    vectors = minilm.embed([DEPLOY, QUERY, CLUSTER])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert vectors[0] @ vectors[1] == pytest.approx(0.494, abs=0.01), "the figure measured for this model"
    assert vectors[0] @ vectors[1] > vectors[2] @ vectors[1] + 0.2


def test_minilm_is_deterministic_and_batch_independent(minilm):
    alone = minilm.embed([QUERY])[0]
    batched = minilm.embed([DEPLOY, QUERY, "x " * 100])[1]
    assert np.allclose(alone, batched, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)
    with pytest.raises(TypeError, match="list of texts"):
        minilm.embed(QUERY)


def test_minilm_reports_what_it_cuts(minilm):
    long = "deployment " * 400
    assert minilm.token_count(long) > 256
    assert minilm.token_count("hello world") == 4
    kept = minilm.embedded_part(long)
    assert 0 < len(kept) < len(long) and long.startswith(kept)
    assert minilm.embedded_part(DEPLOY) == DEPLOY


def test_tokenizer_file_is_checked(tmp_path):
    altered = tmp_path / "tokenizer.json"
    shutil.copy(TOKENIZER_PATH, altered)
    altered.write_bytes(altered.read_bytes() + b" ")
    with pytest.raises(EmbeddingModelError, match="is not the file the workbook was measured with"):
        MiniLMEmbedder(tokenizer_path=altered)
    with pytest.raises(EmbeddingModelError, match="is missing"):
        MiniLMEmbedder(model_path=tmp_path / "nope.onnx")


def stubbed_titan(dimensions: int, texts: list[str]) -> tuple[TitanEmbedder, Stubber]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stubber = Stubber(client)
    for index, text in enumerate(texts):
        body = json.dumps({"embedding": [float(index + 1)] * dimensions, "inputTextTokenCount": 5}).encode()
        stubber.add_response(
            "invoke_model",
            {"body": StreamingBody(io.BytesIO(body), len(body)), "contentType": "application/json"},
            {
                "modelId": "amazon.titan-embed-text-v2:0",
                "contentType": "application/json",
                "accept": "application/json",
                "body": json.dumps({"inputText": text, "dimensions": dimensions, "normalize": True}),
            },
        )
    stubber.activate()
    return TitanEmbedder(client, dimensions=dimensions), stubber


def test_titan_request_and_response_shapes():
    titan, stubber = stubbed_titan(256, [DEPLOY, QUERY])
    vectors = titan.embed([DEPLOY, QUERY])
    assert vectors.shape == (2, 256) and vectors[1][0] == 2.0
    stubber.assert_no_pending_responses()
    assert titan.model_id == "amazon.titan-embed-text-v2:0"


def test_titan_settings_and_factory():
    with pytest.raises(ValueError, match="256, 512 or 1024"):
        TitanEmbedder(object(), dimensions=300)
    assert isinstance(make_embedder("titan", client=object(), dimensions=512), TitanEmbedder)
    with pytest.raises(ValueError, match="Choose one of: minilm, titan"):
        make_embedder("word2vec")


# ---------------------------------------------------------------- the store


def test_store_implements_the_sdk_protocol(store, tmp_path):
    """Instances of both stores (this one, the companion's SelectiveMemoryStore) and of the SDK's own FileMemoryStore
    satisfy strands.memory.MemoryStore, checked at run time. The SDK's Protocol is not runtime-checkable and lists
    its optional methods too (the SDK detects those with _has_method), so the check is a runtime-checkable protocol
    of exactly the members the SDK's requires (compared with it), plus each optional method a store has."""
    import inspect
    from typing import Any, Protocol, runtime_checkable

    from strands.memory import types as memory_types
    from strands.storage import LocalFileStorage
    from strands.vended_memory_stores.file_memory_store import FileMemoryStore

    from companion.memory.selective_memory import SelectiveMemoryStore

    @runtime_checkable
    class RequiredMemoryStore(Protocol):
        name: str
        description: str | None
        max_search_results: int | None
        writable: bool
        extraction: Any

        async def search(self, query: str, options: Any = None) -> list: ...

    assert set(RequiredMemoryStore.__annotations__) == set(MemoryStore.__annotations__), "the SDK's required fields"
    assert list(inspect.signature(RequiredMemoryStore.search).parameters) == list(inspect.signature(MemoryStore.search).parameters)
    optional = {"add": True, "add_messages": True, "initialize": True, "get_tools": False}  # name: a coroutine?
    assert set(optional) | {"search"} == {n for n, v in vars(MemoryStore).items() if inspect.isfunction(v) and n[0] != "_"}

    def problems(candidate) -> list[str]:
        found = [] if isinstance(candidate, RequiredMemoryStore) else ["not a MemoryStore (a required member is missing)"]
        if not inspect.iscoroutinefunction(getattr(type(candidate), "search", None)):
            found.append("search is not async")
        for method, is_async in optional.items():
            if memory_types._has_method(candidate, method) and inspect.iscoroutinefunction(getattr(type(candidate), method)) != is_async:
                found.append(f"{method} should {'' if is_async else 'not '}be async")
        if getattr(candidate, "writable", False) and not memory_types._has_write_sink(candidate):
            found.append("writable but no add or add_messages")
        return found

    stores = [store, SelectiveMemoryStore(tmp_path / "selective.json", user="ada"),
              FileMemoryStore(name="notes", storage=LocalFileStorage(base_dir=str(tmp_path / "files")))]
    for candidate in stores:
        assert problems(candidate) == [], (type(candidate).__name__, problems(candidate))

    class NoExtraction:  # the controls: each of these is refused
        name, description, max_search_results, writable = "x", None, None, False

        async def search(self, query, options=None):
            return []

    class SyncSearch(NoExtraction):
        extraction = None

        def search(self, query, options=None):
            return []

    class NoSink(NoExtraction):
        extraction, writable = None, True

    assert problems(NoExtraction()) == ["not a MemoryStore (a required member is missing)"]
    assert problems(SyncSearch()) == ["search is not async"]
    assert problems(NoSink()) == ["writable but no add or add_messages"]


def test_empty_store_finds_nothing(store):
    assert store.count() == 0
    assert store.search_vectors(QUERY) == [] and store.search_keywords(QUERY) == []
    assert asyncio.run(store.search(QUERY)) == []


def test_vector_search_finds_the_paraphrase_keyword_search_does_not(store):
    store.put_many([DEPLOY, CLUSTER, "The user is allergic to peanuts.", "The user dislikes meetings before 10am."])
    assert store.search_vectors(QUERY, 1)[0].content == DEPLOY
    assert [h.content for h in store.search_keywords(QUERY, 4)][:1] != [DEPLOY]
    entries = asyncio.run(store.search(QUERY, {"max_search_results": 2}))
    assert len(entries) == 2 and entries[0].content == DEPLOY and 0 < entries[0].metadata["score"] <= 1


def test_min_score_threshold_drops_weak_hits(minilm, tmp_path):
    with SqliteVecMemoryStore(tmp_path / "m.db", minilm, min_score=0.4) as strict:
        strict.put_many([DEPLOY, CLUSTER])
        assert [h.content for h in strict.search_vectors(QUERY)] == [DEPLOY]


def test_duplicates_are_stored_once(store):
    first = store.put(DEPLOY)
    again = store.put("  The user prefers deployments   to happen on Tuesday mornings. ")
    batch = store.put_many([CLUSTER, CLUSTER, DEPLOY])
    assert first.added and not again.added and again.id == first.id
    assert [r.added for r in batch] == [True, False, False] and batch[1].id == batch[0].id
    assert store.count() == 2


def test_non_ascii_text(store):
    spanish = "La usuaria prefiere desplegar los martes por la mañana ☕."
    store.put_many([spanish, "Der Nutzer wohnt in München.", DEPLOY])
    assert store.search_keywords("manana")[0].content == spanish, "accents folded in the keyword index"
    assert store.search_vectors("München")[0].content == "Der Nutzer wohnt in München."


def test_text_past_the_token_limit_says_what_is_cut(store, caplog):
    long = "The user keeps a very long diary. " + "Today was an ordinary day at the office. " * 60 + "ZEPHYR is the last word."
    with caplog.at_level(logging.WARNING, logger="companion.memory.vector_store"):
        result = store.put(long)
    assert result.unembedded_chars > 0
    assert "only its first" in caplog.text and "not searchable by meaning" in caplog.text
    assert store.search_keywords("ZEPHYR")[0].content == long.strip(), "the cut tail is still keyword-searchable"


def test_empty_text_is_refused(store):
    with pytest.raises(ValueError, match="must contain some text"):
        store.put("   ")


def test_read_only_store_refuses_writes(minilm, tmp_path):
    with SqliteVecMemoryStore(tmp_path / "ro.db", minilm, writable=False) as read_only:
        with pytest.raises(StoreError, match="read-only"):
            read_only.put(DEPLOY)


def test_reopening_keeps_memories(minilm, tmp_path):
    with SqliteVecMemoryStore(tmp_path / "m.db", minilm) as first:
        first.put_many([DEPLOY, CLUSTER])
    with SqliteVecMemoryStore(tmp_path / "m.db", minilm) as second:
        assert second.count() == 2 and second.search_vectors(QUERY, 1)[0].content == DEPLOY


def test_corrupt_file_is_refused_and_left_alone(minilm, tmp_path):
    path = tmp_path / "memory.db"
    path.write_bytes(b"this is not a database, just some bytes" * 100)
    before = digest(path)
    with pytest.raises(StoreError, match="is not a SQLite database"):
        SqliteVecMemoryStore(path, minilm)
    assert digest(path) == before


def test_foreign_database_is_refused_and_left_alone(minilm, tmp_path):
    path = tmp_path / "app.db"
    connection, _ = connect(path)
    connection.execute("CREATE TABLE invoices (id INTEGER, total REAL)")
    connection.commit()
    connection.close()
    before = digest(path)
    with pytest.raises(StoreError, match="other tables \\(invoices\\), not a memory store"):
        SqliteVecMemoryStore(path, minilm)
    assert digest(path) == before


def test_another_embedders_store_is_refused(minilm, tmp_path):
    path = tmp_path / "memory.db"
    with SqliteVecMemoryStore(path, minilm) as store:
        store.put(DEPLOY)
    before = digest(path)
    titan, _ = stubbed_titan(256, [])
    with pytest.raises(EmbedderMismatchError, match="not comparable"):
        SqliteVecMemoryStore(path, titan)
    assert digest(path) == before


def test_standard_sqlite3_or_sqlean_is_used(tmp_path):
    connection, module = connect(tmp_path / "x.db")
    assert module.__name__ in {"sqlite3", "sqlean"}
    assert connection.execute("SELECT vec_version()").fetchone()[0].startswith("v0.1")
    if not hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        assert module.__name__ == "sqlean", "this interpreter cannot load extensions: the fallback is in use"


# ---------------------------------------------------------------- with the SDK's MemoryManager


def test_search_tool_answers_from_the_store(store):
    store.put_many([DEPLOY, CLUSTER])
    agent = Agent(model=OfflineModel(), memory_manager=MemoryManager(stores=[store], injection=False), callback_handler=None)
    answer = str(agent(QUERY)).strip()
    assert answer == f"From memory: {DEPLOY}"
    assert agent.messages[1]["content"][0]["toolUse"]["name"] == "search_memory"


def test_add_tool_then_a_fresh_agent_recalls_by_injection(store):
    writer = Agent(
        model=OfflineModel(),
        memory_manager=MemoryManager(stores=[store], search_tool_config=False, add_tool_config=True, injection=False),
        callback_handler=None,
    )
    reply = str(writer("Please remember that I prefer deployments to happen on Tuesday mornings.")).strip()
    assert reply == f"Saved to memory: {DEPLOY}"
    assert store.count() == 1
    reader = Agent(model=OfflineModel(), memory_manager=MemoryManager(stores=[store], search_tool_config=False), callback_handler=None)
    assert "Tuesday" in str(reader(QUERY))
    assert "<memory>" not in json.dumps(reader.messages), "injection is for the call only; history stays clean"


def test_automatic_extraction_into_a_writable_store(minilm, tmp_path):
    with SqliteVecMemoryStore(
        tmp_path / "x.db", minilm, extraction=ExtractionConfig(trigger=[InvocationTrigger()])
    ) as extracting:
        agent = Agent(model=OfflineModel(), memory_manager=MemoryManager(stores=[extracting], injection=False), callback_handler=None)
        agent("My codename is ORION and my home city is Lima.")
        stored = {content for _, content, _ in extracting.all()}
    assert stored == {"The user's codename is ORION.", "The user's home city is Lima."}


# ---------------------------------------------------------------- evaluation


def test_pairs_share_no_content_word():
    for pair in load_pairs(PAIRS):
        fact, query = content_words(pair["fact"]), content_words(pair["query"])
        assert not fact & query, pair
        assert not {w[:5] for w in fact} & {w[:5] for w in query}, pair
    assert len(load_pairs(PAIRS)) >= 40


def test_evaluation_scores(minilm):
    result = evaluate(load_pairs(PAIRS), minilm)
    vector, keyword = result["vector (cosine)"], result["keyword (FTS5 BM25)"]
    assert result["pairs"] == result["memories"] >= 40
    assert vector["recall@1"] >= 0.8 and vector["recall@3"] >= 0.95 and vector["mrr"] > keyword["mrr"]
    assert keyword["recall@1"] <= 0.1
    assert 0 <= vector["recall@1"] <= vector["recall@3"] <= 1


def test_evaluation_command(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"fact": DEPLOY, "query": QUERY}) + "\n" + json.dumps({"fact": CLUSTER, "query": "where is prod?"}) + "\n")
    assert main([str(pairs), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["pairs"] == 2 and result["vector (cosine)"]["recall@1"] == 1.0
    assert main([str(pairs)]) == 0
    assert "recall@1" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, message",
    [("not json\n", "line 1: not valid JSON"), ('{"fact": "x"}\n', 'line 1: expected {"fact"'), ("\n", "holds no fact/query pairs")],
)
def test_evaluation_rejects_bad_files(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    assert main([str(bad)]) == 2
    assert message in capsys.readouterr().err


def test_titan_without_credentials_says_what_to_do(monkeypatch, tmp_path):
    for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with pytest.raises(EmbeddingModelError, match="needs AWS credentials.*embedder='minilm'"):
        make_embedder("titan")


# ---------------------------------------------------------------- issue 8.8: the evaluation command's errors


def test_evaluation_command_names_an_unknown_embedder(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"fact": DEPLOY, "query": QUERY}) + "\n")
    assert main([str(pairs), "--embedder", "word2vec"]) == 2
    err = capsys.readouterr().err
    assert "word2vec" in err and "minilm" in err and "titan" in err and "Traceback" not in err


def test_evaluation_command_names_a_file_that_is_not_utf8(tmp_path, capsys):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(json.dumps({"fact": "x", "query": "y"}).encode() + b"\n\xe9t\xe9\n")
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "UTF-8" in err and "line 2" in err, err


def test_evaluation_command_exits_2_from_the_shell(tmp_path):
    import subprocess
    import sys

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"fact": DEPLOY, "query": QUERY}) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "companion.measure.recall_eval", str(pairs), "--embedder", "word2vec"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr and "word2vec" in done.stderr, done.stderr


# ---------------------------------------------------------------- issue 19.6: a store in a folder that does not exist


@pytest.mark.parametrize("where", ["missing", "a-file"])
def test_a_store_in_a_missing_folder_names_the_path(tmp_path, where):
    (tmp_path / "a-file").write_text("not a folder")
    path = tmp_path / where / "memory.db"

    class Embedder:
        model_id, dimensions = "fake-4", 4

    with pytest.raises(StoreError) as raised:  # before: a raw sqlite OperationalError "unable to open database file"
        SqliteVecMemoryStore(path, Embedder())
    message = str(raised.value)
    assert str(path) in message and str(tmp_path / where) in message, message
    assert ("does not exist" if where == "missing" else "is not a folder") in message, message
    assert not (tmp_path / "missing").exists(), "nothing was created"
