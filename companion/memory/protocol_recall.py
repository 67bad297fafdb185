"""One recall check for any Strands `MemoryStore`, through the protocol alone (`add`, then `search`).

Notebook 06 runs it on its thirty-line numpy store and on `SqliteVecMemoryStore`: the same facts, the same questions,
the same scoring, so equal numbers mean the two stores rank alike. `companion.measure.recall_eval` scores the sqlite-vec store
through its own synchronous methods; this goes only through what `MemoryManager` would call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any


def _same(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


async def protocol_recall(store: Any, pairs: Sequence[dict[str, str]]) -> dict[str, Any]:
    """Add every pair's fact with `await store.add`, ask every query with `await store.search` (all memories
    returned), and score where the pair's own fact ranks: recall@1, recall@3, MRR (as recall_eval rounds them),
    and the list of ranks (None for a fact not returned)."""
    facts = list(dict.fromkeys(pair["fact"] for pair in pairs))
    for fact in facts:
        await store.add(fact)
    ranks: list[int | None] = []
    for pair in pairs:
        entries = await store.search(pair["query"], {"max_search_results": len(facts)})
        found = [_same(entry.content) for entry in entries]
        fact = _same(pair["fact"])
        ranks.append(found.index(fact) + 1 if fact in found else None)
    n = len(ranks)
    return {
        "memories": len(facts),
        "recall@1": round(sum(r == 1 for r in ranks) / n, 4),
        "recall@3": round(sum(r is not None and r <= 3 for r in ranks) / n, 4),
        "mrr": round(sum(1 / r for r in ranks if r) / n, 4),
        "ranks": ranks,
    }
