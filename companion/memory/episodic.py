"""Episodic memory: what happened last time in a similar situation, and how it ended (notebook 13).

An episode is one task as it happened: the situation (what the user asked, with what they brought along), what the
agent did (its reply), the outcome (right or wrong, as the user judged it) and the user's feedback in their own words.
`EpisodeStore` keeps episodes in the workbook's vector store (`SqliteVecMemoryStore`, notebook 06): the situation is
what gets embedded, so a new task finds the episodes whose situations were most like it; what the store hands the SDK
is the whole episode, rendered as one memory entry. It implements the SDK's ``MemoryStore`` protocol, so a
``MemoryManager(stores=[episodes], injection=...)`` injects the nearest episode into the user's turn, as notebook 06
injects facts.

`CachedEmbedder` keeps each text's vector once computed: the same situations are embedded again and again when a
scripted set is replayed (companion.measure.experience_eval), and their vectors do not change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from strands.memory import MemoryEntry

from companion.memory.vector_store import SqliteVecMemoryStore
from companion.models.embeddings import Embedder

__all__ = ["CachedEmbedder", "Episode", "EpisodeStore"]

_RENDERED_ID = re.compile(r"Past episode (?P<id>\S+) \(session ")


@dataclass(frozen=True)
class Episode:
    """One task as it happened."""

    id: str
    session: int
    situation: str
    action: str
    outcome: str  # "right" or "wrong", as the user judged it
    feedback: str

    def render(self) -> str:
        """The episode as one memory entry: the four parts in the order they happened."""
        return (f"Past episode {self.id} (session {self.session}). Situation: {self.situation} "
                f"What I did: {self.action} Outcome: {self.outcome}. Feedback: {self.feedback}")


class EpisodeStore(SqliteVecMemoryStore):
    """Episodes searched by the similarity of their situations; the SDK receives each hit as the rendered episode.

    Args:
        path: The SQLite file (its folder is created; ":memory:" for a throw-away store).
        embedder: The embedding model (companion.models.embeddings).
        min_similarity: The lowest cosine similarity between situations at which an episode is recalled.
        max_search_results: How many episodes a search returns at most.
        log_path: A JSON Lines file every recorded episode is appended to (its lineage on disk); None: no file.
    """

    def __init__(self, path: str | Path, embedder: Embedder, *, min_similarity: float = 0.0,
                 max_search_results: int = 1, log_path: Path | None = None) -> None:
        if str(path) != ":memory:" and not str(path).startswith("file:"):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        super().__init__(path, embedder, name="episodes", min_score=min_similarity,
                         description="Past episodes: situation, what was done, outcome, feedback.",
                         max_search_results=max_search_results)
        self.log_path = log_path
        self.episodes: dict[str, Episode] = {}

    def record(self, episode: Episode) -> Episode:
        """Store one episode (its situation embedded); append it to the log file when there is one."""
        self.put(episode.situation, {"episode": asdict(episode)})
        self.episodes[episode.situation] = episode
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(asdict(episode), ensure_ascii=False) + "\n")
        return episode

    def recall(self, situation: str, k: int | None = None) -> list[tuple[Episode, float]]:
        """The episodes whose situations are nearest to `situation`, at or above min_similarity, with the score."""
        return [(self.episodes[hit.content], hit.score) for hit in self.search_vectors(situation, k)
                if hit.content in self.episodes]

    def episode_of(self, entry: str) -> Episode:
        """The stored episode a rendered memory entry names ("Past episode e02 (session 1). Situation: ...")."""
        match = _RENDERED_ID.match(entry.strip())
        found = [e for e in self.episodes.values() if match and e.id == match.group("id")]
        if not found:
            raise KeyError(f"no stored episode is named in {entry[:60]!r}")
        return found[0]

    def similarity(self, a: str, b: str) -> float:
        """The cosine similarity of two texts' embeddings, rounded as the store rounds its scores."""
        vectors = np.asarray(self.embedder.embed([a, b]), dtype=np.float64)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return round(float(vectors[0] @ vectors[1]), 4)

    async def search(self, query: str, options: dict[str, Any] | None = None) -> list[MemoryEntry]:
        """The SDK's search: the nearest episodes, each rendered as one entry, with its score and id."""
        k = (options or {}).get("max_search_results") or self.max_search_results
        return [MemoryEntry(content=episode.render(), metadata={"score": score, "episode": episode.id})
                for episode, score in self.recall(query, k)]


class CachedEmbedder:
    """An embedder that computes each distinct text's vector once and then reuses it (same model, same vectors)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions
        self._vectors: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised row per text, as the inner embedder computes it."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self._vectors[text] = vector
        return np.array([self._vectors[t] for t in texts], dtype=np.float32).reshape(len(texts), self.dimensions)

    def __getattr__(self, name: str) -> Any:  # token_count, embedded_part, max_tokens: the inner model's
        return getattr(self.inner, name)
