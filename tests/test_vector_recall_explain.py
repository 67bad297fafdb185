"""Notebook 06's own helpers: the memory loader, the keyword explanation, the protocol recall check and the two plots."""

from __future__ import annotations

import asyncio
import json

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from strands.memory import MemoryEntry
from strands.storage import LocalFileStorage
from strands.vended_memory_stores.file_memory_store import FileMemoryStore

from companion.measure.keyword_explain import FtsExplainer, fts_terms, hit_rows, sdk_matched, sdk_terms, story, term_rows, words
from companion.memory.protocol_recall import protocol_recall
from companion.memory.vector_store import SqliteVecMemoryStore
from companion.support.memory_loader import PARAPHRASE_PAIRS, USER_MEMORIES, load_user_memories
from companion.support.plots import memory_map_plot, project_2d, similarity_bars_plot


class HashEmbedder:
    """A tiny deterministic embedder: a bag of words hashed into 64 dimensions, unit length (no model needed)."""

    model_id = "test-hash-64"
    dimensions = 64

    def embed(self, texts):
        rows = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in zip(rows, texts):
            for word in words(text):
                row[sum(map(ord, word)) % self.dimensions] += 1.0
            row /= np.linalg.norm(row) or 1.0
        return rows


@pytest.fixture
def memories():
    return load_user_memories()


@pytest.fixture
def filled(tmp_path, memories):
    store = SqliteVecMemoryStore(tmp_path / "memory.db", HashEmbedder(), name="test")
    store.put_many(list(memories.memories))
    files = FileMemoryStore(name="notes", storage=LocalFileStorage(base_dir=str(tmp_path / "files")))

    async def fill():
        for memory in memories.memories:
            await files.add(memory)

    asyncio.run(fill())
    with FtsExplainer(store.path) as explainer:
        yield store, files, explainer
    store.close()


# ---------------------------------------------------------------- loader


def test_loader_reads_the_memory_file(memories):
    assert memories.path == USER_MEMORIES
    assert memories.expected in memories.memories and memories.expected not in memories.earlier
    assert len(memories.earlier) == len(memories.memories) - 1
    assert PARAPHRASE_PAIRS.is_file()


@pytest.mark.parametrize("content, message", [
    ("not json", "not valid JSON"),
    ({"memories": [], "query": "q?", "expected": "x"}, "non-empty list"),
    ({"memories": ["a", "a"], "query": "q?", "expected": "a"}, "the same text twice"),
    ({"memories": ["a"], "query": " ", "expected": "a"}, '"query" must be'),
    ({"memories": ["a"], "query": "q?", "expected": "b"}, '"expected" must be one of'),
])
def test_loader_names_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "memories.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_user_memories(path)


# ---------------------------------------------------------------- keyword explanation


def test_terms_follow_each_search(memories):
    kept, dropped = sdk_terms(memories.query)
    assert kept == ["user", "like", "ship", "releases"]
    assert dropped == ["when", "does", "this", "to"]
    assert fts_terms(memories.query) == ["when", "does", "this", "user", "like", "to", "ship", "releases"]
    assert sdk_matched(memories.query, "the-user-prefers-deployments.md", memories.expected) == ["user"]


def test_fts_points_add_up_to_the_store_score(filled, memories):
    store, _, explainer = filled
    for hit in store.search_keywords(memories.query, store.count()):
        assert sum(explainer.matched(memories.query, hit.content).values()) == pytest.approx(hit.score, abs=1e-3)


def test_term_rows_count_memories_from_the_index(filled, memories):
    store, _, explainer = filled
    rows = {row["query word"]: row for row in term_rows(memories.query, explainer, store.count())}
    assert rows["user"]["memories containing it"] == "12 of 12" and rows["user"]["earned in"] == "every memory"
    assert rows["to"]["memories containing it"] == "2 of 12"
    assert rows["to"]["earned in"] == "The user is allergic to peanuts."
    assert rows["this"]["memories containing it"] == "0 of 12", "the old claim ('this' is in almost every memory) is false"
    assert rows["to"]["SDK file store"] == "stop word: dropped" and rows["user"]["SDK file store"] == "kept"


def test_story_and_hit_rows_say_what_matched(filled, memories):
    store, files, explainer = filled
    total = store.count()
    sdk_all = asyncio.run(files.search(memories.query, {"max_search_results": total}))
    fts_all = store.search_keywords(memories.query, total)
    text = story(memories.query, memories.expected, explainer, total, sdk_all, fts_all)
    assert "'user' is in 12 of 12 memories" in text
    assert "12 of 12 memories share the top score 1" in text
    assert "Top hit 'The user is allergic to peanuts.'" in text and "'to' 1.615" in text
    assert "it ranks 2 of 12" in text
    rows = hit_rows(memories.query, sdk_all[:3], fts_all[:3], store.search_vectors(memories.query, 3), explainer)
    assert [r["search"] for r in rows].count("FTS5 (BM25)") == 3
    assert rows[0]["matched words"] == "user"
    assert rows[3]["matched words"] == "user 0.000, to 1.615"


# ---------------------------------------------------------------- the protocol recall check


class ListStore:
    """A store that returns its memories in insertion order, whatever the query."""

    name, description, max_search_results, writable, extraction = "list", "", 5, True, None

    def __init__(self):
        self.texts = []

    async def add(self, content, metadata=None):
        self.texts.append(content)
        return str(len(self.texts))

    async def search(self, query, options=None):
        k = (options or {}).get("max_search_results") or self.max_search_results
        return [MemoryEntry(content=t) for t in self.texts[:k]]


def test_protocol_recall_scores_ranks():
    pairs = [{"fact": f"fact {i}", "query": f"q{i}"} for i in range(4)]
    result = asyncio.run(protocol_recall(ListStore(), pairs))
    assert result["ranks"] == [1, 2, 3, 4]
    assert result["recall@1"] == 0.25 and result["recall@3"] == 0.75
    assert result["mrr"] == round((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4, 4)


def test_protocol_recall_agrees_between_stores(tmp_path):
    pairs = [{"fact": "The user likes green tea.", "query": "tea green"}, {"fact": "The cat sleeps.", "query": "cat"}]
    with SqliteVecMemoryStore(":memory:", HashEmbedder()) as store:
        real = asyncio.run(protocol_recall(store, pairs))
    assert real["ranks"] == [1, 1] and real["memories"] == 2


# ---------------------------------------------------------------- plots


def test_similarity_bars_are_every_score_sorted_with_the_answer_highlighted():
    labels = ["The user a.", "The user b.", "The user c."]
    fig = similarity_bars_plot(labels, [0.2, 0.7, -0.1], "q?", highlight="The user c.", min_score=0.3, top_k=1)
    bars = fig.axes[0].containers[0]
    assert [round(b.get_width(), 3) for b in bars] == [0.7, 0.2, -0.1]
    colors = [matplotlib.colors.to_hex(b.get_facecolor()) for b in bars]
    assert colors[2] == matplotlib.colors.to_hex("tab:blue") and colors[0] != colors[2]
    assert fig.axes[0].get_xlim()[0] < -0.1


def test_projection_reports_what_it_keeps():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(10, 6)) * np.array([5, 3, 0.1, 0.1, 0.1, 0.1])
    flat = project_2d(points, points[0])
    assert flat["variance_kept"] > 0.95
    assert flat["points"].shape == (10, 2) and flat["distance_2d"][0] == pytest.approx(0.0)


def test_map_labels_do_not_overlap(memories):
    embedder = HashEmbedder()
    vectors = embedder.embed(list(memories.memories))
    fig = memory_map_plot(memories.memories, vectors, memories.query, embedder.embed([memories.query])[0],
                          highlight=memories.expected)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].texts]
    assert len(boxes) == len(memories.memories)
    overlaps = [(i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])]
    assert not overlaps
    assert "keep" in fig.axes[0].get_title() and "not the cosine scores" in fig.axes[0].get_title()


def test_map_is_drawn_to_scale(memories):
    """Distances in the picture are the 2-D distances: one pixel scale for every memory, across and up alike."""
    embedder = HashEmbedder()
    vectors = embedder.embed(list(memories.memories))
    query_vector = embedder.embed([memories.query])[0]
    fig = memory_map_plot(memories.memories, vectors, memories.query, query_vector, highlight=memories.expected)
    fig.canvas.draw()
    ax, flat = fig.axes[0], project_2d(vectors, query_vector)
    dots = ax.transData.transform(ax.collections[0].get_offsets())
    star = ax.transData.transform(ax.collections[-1].get_offsets())[0]
    scale = np.linalg.norm(dots - star, axis=1) / flat["distance_2d"]
    assert scale.max() / scale.min() == pytest.approx(1.0, abs=1e-6)
