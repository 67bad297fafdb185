"""Why a keyword search ranks what it ranks: the query words each search uses, which memories contain them, and the
points each word earns, for notebook 06.

Two keyword searches are explained:
- the SDK's `FileMemoryStore` (1.62.0): `KeywordSearchStrategy` drops the words in its `STOP_WORDS` list, scores a
  file by how many distinct remaining query words occur in its name or text, and keeps the storage's file order
  (alphabetical) among equal scores;
- FTS5 in `SqliteVecMemoryStore`: every query word ORed, ranked by BM25, where a word's weight falls with the number
  of memories containing it (a word in every memory weighs next to nothing).
Counts come from the data (the memory texts and SQL on the store's file), not from the search results they explain.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from strands.storage.search.keyword import STOP_WORDS, tokenize

from companion.memory.vector_store import connect, keyword_query

_EXTENSION = re.compile(r"\.[^./]*$")


def words(text: str) -> list[str]:
    """Lower-cased words of `text` in order, each once (the split both keyword searches use: runs of letters/digits)."""
    return list(dict.fromkeys(w for w in re.split(r"\W+", text.lower()) if w))


def sdk_terms(query: str) -> tuple[list[str], list[str]]:
    """(kept, dropped): the query words the SDK's keyword search matches on, and the stop words it drops."""
    kept = [w for w in words(query) if w not in STOP_WORDS]
    dropped = [w for w in words(query) if w in STOP_WORDS]
    return kept, dropped


def fts_terms(query: str) -> list[str]:
    """The words the store's FTS5 query ORs together (every word of the query, stop words included)."""
    return re.findall(r'"([^"]+)"', keyword_query(query))


def sdk_matched(query: str, key: str, content: str) -> list[str]:
    """The kept query words found in a file-store entry (its file name without extension, and its text)."""
    kept, _ = sdk_terms(query)
    found = tokenize(f"{_EXTENSION.sub('', key)} {content}")
    return [w for w in kept if w in found]


class FtsExplainer:
    """Reads a `SqliteVecMemoryStore` file with its own connection: which memories contain a word, and the BM25
    points a word earns in one memory (FTS5's bm25() of a one-word query is that word's share of the full score)."""

    def __init__(self, path: str | Path) -> None:
        self._db, _ = connect(path)

    def containing(self, term: str) -> list[str]:
        """Memories whose FTS5 tokens include `term`, in insertion order."""
        rows = self._db.execute(
            "SELECT content FROM memory_keywords WHERE memory_keywords MATCH ? ORDER BY rowid", (f'"{term}"',)
        ).fetchall()
        return [row[0] for row in rows]

    def points(self, term: str, content: str) -> float | None:
        """BM25 points (higher is better) that `term` earns in the memory `content`; None if it does not occur."""
        row = self._db.execute(
            "SELECT -bm25(memory_keywords) FROM memory_keywords WHERE memory_keywords MATCH ? AND content = ?",
            (f'"{term}"', content),
        ).fetchone()
        return None if row is None else float(row[0])

    def matched(self, query: str, content: str) -> dict[str, float]:
        """Each query word that occurs in `content`, with its BM25 points."""
        out = {}
        for term in fts_terms(query):
            points = self.points(term, content)
            if points is not None:
                out[term] = points
        return out

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> FtsExplainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def term_rows(query: str, explainer: FtsExplainer, total: int) -> list[dict[str, Any]]:
    """One row per query word: does the SDK's keyword search keep it, how many memories contain it, and the most BM25
    points it earns in any memory."""
    kept, _ = sdk_terms(query)
    rows = []
    for term in fts_terms(query):
        holders = explainer.containing(term)
        best = max(((explainer.points(term, m) or 0.0), m) for m in holders) if holders else None
        rows.append({
            "query word": term,
            "SDK file store": "kept" if term in kept else "stop word: dropped",
            "memories containing it": f"{len(holders)} of {total}",
            "best BM25 points": f"{best[0]:.3f}" if best else "-",
            "earned in": best[1] if best and len(holders) < total else ("every memory" if best else "-"),
        })
    return rows


def hit_rows(query: str, sdk_hits: Sequence[Any], fts_hits: Sequence[Any], vec_hits: Sequence[Any],
             explainer: FtsExplainer) -> list[dict[str, Any]]:
    """The three searches' hits as long-format rows (search, rank, score, matched words, memory): narrow enough to
    read at 1280 px. `sdk_hits` are the file store's MemoryEntry results, the others the vector store's Hits."""
    rows = []
    for rank, entry in enumerate(sdk_hits, start=1):
        key = Path(entry.metadata["path"]).name
        rows.append({"search": "SDK file store", "rank": rank, "score": float(entry.metadata["score"]),
                     "matched words": ", ".join(sdk_matched(query, key, entry.content)) or "-", "memory": entry.content})
    for rank, hit in enumerate(fts_hits, start=1):
        matched = explainer.matched(query, hit.content)
        rows.append({"search": "FTS5 (BM25)", "rank": rank, "score": hit.score,
                     "matched words": ", ".join(f"{t} {p:.3f}" for t, p in matched.items()) or "-", "memory": hit.content})
    for rank, hit in enumerate(vec_hits, start=1):
        rows.append({"search": "vector (cosine)", "rank": rank, "score": hit.score, "matched words": "(no words: meaning)",
                     "memory": hit.content})
    return rows


def ranked_rows(query: str, sdk_all: Sequence[Any], fts_all: Sequence[Any], vec_all: Sequence[Any],
                explainer: FtsExplainer, *, top_k: int, answer: str) -> list[dict[str, Any]]:
    """`hit_rows` of each search's full result list, cut to its first `top_k` rows and the answer's row, wherever it
    ranks: the answer's rank in every search stands in one table."""
    rows = hit_rows(query, sdk_all, fts_all, vec_all, explainer)
    return [row for row in rows if row["rank"] <= top_k or row["memory"] == answer]


def story(query: str, answer: str, explainer: FtsExplainer, total: int, sdk_all: Sequence[Any],
          fts_all: Sequence[Any]) -> str:
    """Plain sentences saying why each keyword search ranked what it did for this query. `sdk_all` and `fts_all` are
    each search's full result list (every memory it matched), so the answer's rank can be read off them."""
    kept, dropped = sdk_terms(query)
    lines = [f"SDK file store: drops the stop words {', '.join(dropped) or '(none)'}; keeps {', '.join(kept) or '(none)'}."]
    present = {t: len(explainer.containing(t)) for t in kept}
    found = {t: n for t, n in present.items() if n}
    absent = [t for t, n in present.items() if not n]
    if found:
        lines.append("  " + "; ".join(f"'{t}' is in {n} of {total} memories" for t, n in found.items())
                     + (f"; {', '.join(repr(t) for t in absent)} in none." if absent else "."))
    else:
        lines.append("  None of them is in any memory.")
    if sdk_all:
        top = max(float(e.metadata["score"]) for e in sdk_all)
        tied = sum(float(e.metadata["score"]) == top for e in sdk_all)
        lines.append(f"  {tied} of {total} memories share the top score {top:g}; equal scores keep alphabetical "
                     "file-name order.")
    lines.append("  " + _rank_sentence(answer, [e.content for e in sdk_all]))
    lines.append(f"FTS5: ORs all {len(fts_terms(query))} query words; a word in every memory earns next to no BM25 points.")
    if fts_all:
        top_hit = fts_all[0]
        lines.append(f"  Top hit '{top_hit.content}' scores {top_hit.score:.3f}: "
                     + ", ".join(f"'{t}' {p:.3f}" for t, p in explainer.matched(query, top_hit.content).items()) + ".")
    matched = explainer.matched(query, answer)
    lines.append("  The answer matches " + (", ".join(f"'{t}' {p:.3f}" for t, p in matched.items()) or "no query word")
                 + "; " + _rank_sentence(answer, [h.content for h in fts_all], lead=False))
    return "\n".join(lines)


def _rank_sentence(answer: str, ranked: Sequence[str], lead: bool = True) -> str:
    prefix = "The answer" if lead else "it"
    if answer in ranked:
        return f"{prefix} ranks {ranked.index(answer) + 1} of {len(ranked)} matched memories."
    return f"{prefix} is not among the {len(ranked)} matched memories."
