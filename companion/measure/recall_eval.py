"""Recall evaluation: store every fact of a JSONL file in one store, ask every query, score keyword vs vector search.

    python -m companion.measure.recall_eval PAIRS.jsonl [--json] [--embedder minilm|titan]

Each line of PAIRS.jsonl is {"fact": "...", "query": "..."}. Printed: recall@1, recall@3 and MRR (mean reciprocal rank
of the pair's own fact) for FTS5 keyword search (BM25) and for vector search. Nothing is written to disk: the store
lives in memory.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from companion.memory.vector_store import Hit, SqliteVecMemoryStore
from companion.models.embeddings import EMBEDDERS, Embedder, EmbeddingModelError, make_embedder
from companion.support.display import text_table

FUNCTION_WORDS = set(
    """a an the and or but if of to in on at by for with from into over under about as is are was were be been being
    do does did done have has had having i me my we our you your they them their this that these those it its he she
    his her who whom which what when where why how can could should would will shall may might must not no so than
    too very any some all each every there here up down out off then just also only more most other such own same
    user user's users""".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of `text` without function words (and without "user": every memory is about the user)."""
    return {word for word in re.findall(r"[a-z0-9']+", text.lower()) if word not in FUNCTION_WORDS}


def sharing_a_word(pairs: list[dict[str, str]]) -> list[dict[str, str]]:
    """The pairs whose question shares a content word with its fact: those a keyword search could find by that word."""
    return [pair for pair in pairs if content_words(pair["fact"]) & content_words(pair["query"])]


def load_pairs(path: str | Path) -> list[dict[str, str]]:
    """Read and check a JSONL file of fact/query pairs; an error names the line and what is wrong with it."""
    pairs = []
    for number, raw in enumerate(Path(path).read_bytes().splitlines(), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{path}, line {number}: not UTF-8 text (byte {raw[error.start]:#04x} at column {error.start + 1}); "
                "save the file as UTF-8"
            ) from None
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as error:
            raise ValueError(f"{path}, line {number}: not valid JSON ({error})") from None
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item[k].strip() for k in ("fact", "query")):
            raise ValueError(f'{path}, line {number}: expected {{"fact": "...", "query": "..."}} with non-empty strings')
        pairs.append({"fact": item["fact"], "query": item["query"]})
    if not pairs:
        raise ValueError(f"{path} holds no fact/query pairs")
    return pairs


def _scores(pairs: list[dict[str, str]], search: Callable[[str, int], list[Hit]], k: int) -> dict[str, float]:
    ranks = []
    for pair in pairs:
        found = [hit.content for hit in search(pair["query"], k)]
        fact = re.sub(r"\s+", " ", pair["fact"]).strip()
        ranks.append(found.index(fact) + 1 if fact in found else None)
    n = len(ranks)
    return {
        "recall@1": round(sum(r == 1 for r in ranks) / n, 4),
        "recall@3": round(sum(r is not None and r <= 3 for r in ranks) / n, 4),
        "mrr": round(sum(1 / r for r in ranks if r) / n, 4),
    }


def evaluate(pairs: list[dict[str, str]], embedder: Embedder) -> dict[str, Any]:
    """Scores for keyword and vector search over one in-memory store holding every fact."""
    with SqliteVecMemoryStore(":memory:", embedder, name="evaluation") as store:
        store.put_many([pair["fact"] for pair in pairs])
        k = store.count()
        return {
            "pairs": len(pairs),
            "memories": k,
            "embedder": embedder.model_id,
            "keyword (FTS5 BM25)": _scores(pairs, store.search_keywords, k),
            "vector (cosine)": _scores(pairs, store.search_vectors, k),
        }


def main(argv: list[str] | None = None) -> int:
    """The command line: prints a table, or JSON with --json."""
    parser = argparse.ArgumentParser(prog="python -m companion.measure.recall_eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", help="a JSONL file of {\"fact\": ..., \"query\": ...} lines")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--embedder", default="minilm", help="minilm (offline, default) or titan (Bedrock)")
    args = parser.parse_args(argv)
    if args.embedder.strip().lower() not in EMBEDDERS:
        print(f"error: unknown embedder {args.embedder!r}; choose one of: {', '.join(EMBEDDERS)}", file=sys.stderr)
        return 2
    try:
        pairs = load_pairs(args.pairs)
    except OSError as error:
        print(f"error: cannot read {args.pairs}: {error.strerror or error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        embedder = make_embedder(args.embedder)
    except (EmbeddingModelError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = evaluate(pairs, embedder)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['pairs']} pairs, {result['memories']} memories, embedder {result['embedder']}")
        rows = [{"search": name, **result[name]} for name in ("keyword (FTS5 BM25)", "vector (cosine)")]
        print(text_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
