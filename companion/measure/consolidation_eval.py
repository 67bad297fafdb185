"""Measuring consolidation: the merge threshold on labelled pairs, and recall before and after on held-out questions.

    python -m companion.measure.consolidation_eval   # the threshold chosen on the tuning pairs, scored on both sets

The threshold is chosen on `data/experience/consolidation/pairs_tuning.jsonl` only; the held-out pairs
(`pairs_heldout.jsonl`: no pair of it is a tuning pair, but one of its 59 distinct sentences, "The user writes data
pipelines in Python.", is also in a tuning pair, and most of its `shape` labels also occur among the tuning pairs)
were committed alone, with `questions.jsonl`, in commit 803d4b0, whose message says they were written and hashed before any
similarity was computed; `FROZEN` holds their sha256 since commit f4d8336, the one that first chose the threshold.
A pair is merged when the job would merge it: cosine similarity of its two embeddings at or above the threshold AND
facts that do not differ (`companion.memory.consolidation.compatible`: where both texts state attributes, the same ones
with the same values). Recall is scored on `questions.jsonl`, questions written in other words than the memories,
never used to choose anything.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from companion.memory.consolidation import compatible, facts_of
from companion.memory.selective_memory import (
    LINEAGE_KEY,
    Clock,
    SelectiveMemoryStore,
    injected_entries,
    injected_tokens,
    read_records,
)
from companion.memory.vector_store import Hit, SqliteVecMemoryStore
from companion.models.embeddings import Embedder
from companion.support.figures import describe_figure
from companion.support.paths import DATA_DIR

DATA = DATA_DIR / "experience" / "consolidation"
TUNING = DATA / "pairs_tuning.jsonl"
HELDOUT = DATA / "pairs_heldout.jsonl"
HISTORY = DATA / "history.json"
QUESTIONS = DATA / "questions.jsonl"
FROZEN = {
    "pairs_heldout.jsonl": "267e520731f30f5cfdc6da0f3031160fdc50db35b6e304d65d48a9875670a450",
    "questions.jsonl": "393719eeb22dd17fa0c0129aef631df9ff94324acc8749bdbed7e886280ee696",
}
"""The sha256 of each held-out file, first committed in f4d8336 (with the threshold); the files themselves were committed
alone before it, in 803d4b0. A file that matches is unchanged since this constant was written: the match does not show
when the file was written (the git history does)."""


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every JSON object of a JSON Lines file (blank lines skipped); an error names the line."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as error:
                raise ValueError(f"{path}, line {number}: not valid JSON ({error})") from None
    return rows


def similarities(pairs: Sequence[dict[str, Any]], embedder: Embedder) -> np.ndarray:
    """Cosine similarity of each pair's two texts ("a", "b") under `embedder`."""
    a = np.asarray(embedder.embed([p["a"] for p in pairs]), dtype=np.float64)
    b = np.asarray(embedder.embed([p["b"] for p in pairs]), dtype=np.float64)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def merges(pairs: Sequence[dict[str, Any]], sims: np.ndarray, threshold: float) -> list[bool]:
    """Whether the job would merge each pair: close enough, and no fact of one contradicts the other."""
    return [bool(s >= threshold) and compatible(p["a"], p["b"]) for p, s in zip(pairs, sims)]


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion hits/n."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(max(0.0, centre - half), 2), round(min(1.0, centre + half), 2))


def scores(pairs: Sequence[dict[str, Any]], merged: Sequence[bool]) -> dict[str, Any]:
    """Counts and rates of merge decisions against the labels: a false merge joins two different facts."""
    tp = sum(m and p["duplicate"] for p, m in zip(pairs, merged))
    fp = sum(m and not p["duplicate"] for p, m in zip(pairs, merged))
    fn = sum(not m and p["duplicate"] for p, m in zip(pairs, merged))
    tn = len(pairs) - tp - fp - fn
    duplicates, different = tp + fn, fp + tn
    return {
        "pairs": len(pairs),
        "duplicates merged": f"{tp} of {duplicates}",
        "different facts merged": f"{fp} of {different}",
        "accuracy": round((tp + tn) / len(pairs), 3),
        "accuracy 95% interval": wilson(tp + tn, len(pairs)),
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
    }


def choose_threshold(pairs: Sequence[dict[str, Any]], sims: np.ndarray) -> float:
    """The threshold with the best accuracy of the job's decisions on these pairs; on a tie, the highest one
    (merging two different facts loses one of them, keeping a duplicate only costs tokens). Candidates are the
    midpoints between consecutive distinct similarities, rounded to 3 decimals."""
    values = sorted(set(np.round(sims, 4)))
    candidates = [round((lo + hi) / 2, 3) for lo, hi in zip(values, values[1:])] or [round(float(values[0]), 3)]
    labels = [p["duplicate"] for p in pairs]

    def accuracy(t: float) -> int:
        return sum(m == y for m, y in zip(merges(pairs, sims, t), labels))

    return max(candidates, key=lambda t: (accuracy(t), t))


def threshold_report(embedder: Embedder, tuning: str | Path = TUNING, heldout: str | Path = HELDOUT, *,
                     threshold: float | None = None) -> dict[str, Any]:
    """The threshold chosen on the tuning pairs, and the job's decisions scored on tuning and held-out pairs: at the
    chosen threshold, or at `threshold` when one is given (`chosen` always holds the chosen one)."""
    tune, held = read_jsonl(tuning), read_jsonl(heldout)
    tune_sims, held_sims = similarities(tune, embedder), similarities(held, embedder)
    chosen = choose_threshold(tune, tune_sims)
    threshold = chosen if threshold is None else threshold
    return {
        "chosen": chosen,
        "threshold": threshold,
        "tuning": scores(tune, merges(tune, tune_sims, threshold)),
        "held-out": scores(held, merges(held, held_sims, threshold)),
        "held-out false merges": [(p["a"], p["b"], round(float(s), 3)) for p, s, m in
                                  zip(held, held_sims, merges(held, held_sims, threshold)) if m and not p["duplicate"]],
        "held-out missed": [(p["a"], p["b"], round(float(s), 3)) for p, s, m in
                            zip(held, held_sims, merges(held, held_sims, threshold)) if not m and p["duplicate"]],
        "pairs": {"tuning": (tune, tune_sims), "held-out": (held, held_sims)},
    }


def pairs_plot(report: dict[str, Any]) -> Any:
    """Each labelled pair's cosine similarity, duplicates and different facts, tuning and held-out, with the
    threshold; a pair the job merges or keeps apart against its label is drawn hollow. The figure carries its
    one-sentence description (`pairs_description`), for `companion.support.figures.show`."""
    import matplotlib.pyplot as plt

    threshold = report["threshold"]
    rows = [("tuning", True), ("tuning", False), ("held-out", True), ("held-out", False)]
    with plt.rc_context({"font.size": 11}):
        fig, ax = plt.subplots(figsize=(10, 4))
        for y, (name, duplicate) in enumerate(rows):
            pairs, sims = report["pairs"][name]
            decided = merges(pairs, sims, threshold)
            color = "#3a7bd5" if duplicate else "#e07b39"
            for pair, sim, merged in zip(pairs, sims, decided):
                if pair["duplicate"] != duplicate:
                    continue
                wrong = merged != duplicate
                ax.scatter(sim, y, s=60, marker="o", linewidths=1.5, edgecolors=color,
                           facecolors="none" if wrong else color, alpha=0.8)
        ax.axvline(threshold, color="#333333", linestyle="--", lw=1.5)
        ax.text(threshold, -0.5, f" threshold {threshold}", va="center")
        ax.set_yticks(range(len(rows)), [f"{name}: {'duplicates' if d else 'different facts'}" for name, d in rows])
        ax.set_ylim(-0.8, len(rows) - 0.4)
        ax.set_xlabel("cosine similarity of the two memories' embeddings\n(hollow: decided against the label; "
                      "filled different facts right of the line: kept apart by the facts they state)")
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
        ax.set_title("Which labelled pairs the consolidation job merges")
        fig.tight_layout()
    return describe_figure(fig, pairs_description(report))


def pairs_description(report: dict[str, Any]) -> str:
    """One sentence saying what `pairs_plot` shows, written from the same data."""
    parts = []
    for name in ("tuning", "held-out"):
        pairs, sims = report["pairs"][name]
        dup = [float(s) for p, s in zip(pairs, sims) if p["duplicate"]]
        other = [float(s) for p, s in zip(pairs, sims) if not p["duplicate"]]
        score = report[name]
        parts.append(f"{name}: duplicates {min(dup):.2f} to {max(dup):.2f}, different facts {min(other):.2f} to "
                     f"{max(other):.2f}, {score['duplicates merged']} duplicates and "
                     f"{score['different facts merged']} different-fact pairs merged")
    return (f"Cosine similarity of each labelled memory pair with the threshold {report['threshold']} as a dashed "
            f"line, hollow markers for the pairs the job decides against their label; {'; '.join(parts)}.")


# ---------------------------------------------------------------------- recall


def labels(store_path: str | Path, key: str = "fact") -> dict[str, set[str]]:
    """The labels each record of a store file carries: its own `metadata[key]`, or for a record written by
    consolidation, the labels of the records its lineage names as parents (followed back to the first writes)."""
    records = {r["id"]: r for r in read_records(store_path)}
    found: dict[str, set[str]] = {}

    def of(record_id: str) -> set[str]:
        if record_id not in found:
            found[record_id] = set()  # a cycle ends here
            record = records[record_id]
            own = (record.get("metadata") or {}).get(key)
            parents = ((record.get("metadata") or {}).get(LINEAGE_KEY) or {}).get("parents") or []
            found[record_id] = ({own} if own else set()).union(*(of(p) for p in parents if p in records))
        return found[record_id]

    for record_id in records:
        of(record_id)
    return found


def vector_index(path: str | Path, records: Sequence[dict[str, Any]], embedder: Embedder, k: int) -> SqliteVecMemoryStore:
    """A sqlite-vec store at `path` holding the text of each given record (the same text twice is one row)."""
    Path(path).unlink(missing_ok=True)
    index = SqliteVecMemoryStore(path, embedder, name="memories", max_search_results=k)
    index.put_many([r["content"] for r in records], [{"record": r["id"]} for r in records])
    return index


def says(text: str, value: str) -> bool:
    """Whether `text` contains `value` as a word of its own, or its plural ("peanut" in "peanuts"; "Go" not in "Good")."""
    return re.search(rf"(?<![\w-]){re.escape(value)}s?(?![\w-])", text, re.IGNORECASE) is not None


def ranks(questions: Sequence[dict[str, Any]], search: Callable[[str, int], list[Hit]],
          hit: Callable[[dict[str, Any], str], bool], k: int) -> list[int | None]:
    """The rank (1-based) of the first hit that answers each question within the top k, or None."""
    out = []
    for question in questions:
        found = [h.content for h in search(question["question"], k)]
        out.append(next((i + 1 for i, text in enumerate(found) if hit(question, text)), None))
    return out


def contradictory_pairs(entries: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of entries that state the same attribute with different values (read with the offline model's rules)."""
    stated = [(text, facts_of(text)) for text in entries]
    return [(a, b) for i, (a, fa) in enumerate(stated) for b, fb in stated[i + 1:]
            if any(key in fb and fb[key] != value for key, value in fa.items())]


def repeats(entries: Sequence[str], labels_of: dict[str, set[str]]) -> int:
    """How many of one call's entries state a fact an earlier entry of the same call already stated (by label)."""
    seen: set[str] = set()
    count = 0
    for text in entries:
        found = labels_of.get(text, set())
        count += bool(found & seen)
        seen |= found
    return count


def recall_at(found: Sequence[int | None], k: int) -> float:
    """Share of questions answered within the top k."""
    return round(sum(r is not None and r <= k for r in found) / len(found), 3) if found else 0.0


# ---------------------------------------------------------------------- the history, before and after (notebook 15)

KINDS = ("new", "restatement", "duplicate", "changed value", "unrelated")


def write_history(path: str | Path, history: str | Path = HISTORY) -> tuple[dict[str, SelectiveMemoryStore], Clock]:
    """Write the scripted history into one store file, as an extracting agent that never supersedes would have: each
    memory a minute after the one before, within the week of its session, labelled with its fact (`metadata["fact"]`)
    and with the lineage of an extraction. Returns one store per user (all on that file) and their clock, set to a day
    after the last session began."""
    data = json.loads(Path(history).read_text(encoding="utf-8"))
    start = {int(n): datetime.fromisoformat(t) for n, t in data["sessions"].items()}
    clock = Clock(start[1])
    stores: dict[str, SelectiveMemoryStore] = {}
    for minute, memory in enumerate(data["memories"]):
        clock.now = start[memory["session"]] + timedelta(minutes=minute)
        user = memory["user"]
        store = stores.setdefault(user, SelectiveMemoryStore(path, user=user, clock=clock))
        origin = {"derived": "extraction", "session_id": f"{user}-{memory['session']}", "messages": []}
        store.write(memory["content"], {"fact": memory["fact"], LINEAGE_KEY: origin})
    clock.now = start[max(start)] + timedelta(days=1)
    return stores, clock


def kinds(stores: dict[str, SelectiveMemoryStore], history: str | Path = HISTORY) -> list[dict[str, Any]]:
    """Per user: how many of the history's memories are of each kind, and how many are current in the store."""
    memories = json.loads(Path(history).read_text(encoding="utf-8"))["memories"]
    return [{"user": user, **{kind: sum(m["user"] == user and m["kind"] == kind for m in memories) for kind in KINDS},
             "current memories": len(store.records())} for user, store in stores.items()]


def restatements_in_tuning(user: str = "ada", history: str | Path = HISTORY,
                           tuning: str | Path = TUNING) -> tuple[int, int]:
    """(how many, out of how many): pairs of the user's distinct memories in the history that state the same fact
    (the same label), and of those, the pairs that are tuning pairs word for word."""
    memories = json.loads(Path(history).read_text(encoding="utf-8"))["memories"]
    label = {m["content"]: m["fact"] for m in memories if m["user"] == user}
    tuning_pairs = {frozenset((p["a"], p["b"])) for p in read_jsonl(tuning)}
    same = [frozenset(p) for p in itertools.combinations(sorted(label), 2) if len({label[t] for t in p}) == 1]
    return sum(p in tuning_pairs for p in same), len(same)


def state_row(state: str, store_path: str | Path, records: Sequence[dict[str, Any]], index: SqliteVecMemoryStore,
              reader: Any, questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One state of a store, measured: its current memories and index rows, what the reader's calls received (entries,
    tokens of the injected block, contradictory pairs by the fact reader, repeated facts by label) and recall@1 and @3
    of the questions by fact label. `reader` is the reading agent's `MeteredModel`, one call per question."""
    fact_labels = labels(store_path)
    by_text: dict[str, set[str]] = {}
    for r in records:
        by_text.setdefault(r["content"], set()).update(fact_labels[r["id"]])
    found = ranks(questions, index.search_vectors, lambda q, text: q["fact"] in by_text.get(text, ()), k=3)
    received = [injected_entries(x["messages"]) for x in reader.exchanges]
    sizes = [len(e) for e in received]
    return {
        "memories": state,
        "current memories": len(records),
        "index rows": index.count(),
        "entries per call": f"{min(sizes, default=0)}-{max(sizes, default=0)}",
        "tokens injected per call": round(sum(injected_tokens(x["messages"]) for x in reader.exchanges)
                                          / max(len(questions), 1), 1),
        "contradictory pairs injected": sum(len(contradictory_pairs(e)) for e in received),
        "repeated facts injected": sum(repeats(e, by_text) for e in received),
        "recall@1": recall_at(found, 1),
        "recall@3": recall_at(found, 3),
    }



# ---------------------------------------------------------------------- notebook 15's second cold read

KIND_MEANINGS = {
    "new": "a fact stated for the first time",
    "restatement": "a stored fact again, in other words",
    "duplicate": "a stored memory again, word for word",
    "changed value": "a new value for a stored attribute",
    "unrelated": "a new fact worded like a stored one",
}
"""What each `kind` of the history means, one line each (the history's README says the same)."""

ENTRY_COLORS = {"outdated value": "#d62728", "repeat": "#ff9f40", "the asked fact": "#2ca02c",
                "another fact": "#e6e6e6"}
"""The colour of each kind of injected entry in `calls_plot`."""


def kinds_explained(stores: dict[str, SelectiveMemoryStore], history: str | Path = HISTORY) -> list[dict[str, Any]]:
    """One row per kind of the history's memories, with what it means and how many each user has; then a row of the
    memories current in each user's store."""
    memories = json.loads(Path(history).read_text(encoding="utf-8"))["memories"]
    rows = [{"kind": kind, "what it is": KIND_MEANINGS[kind],
             **{user: sum(m["user"] == user and m["kind"] == kind for m in memories) for user in stores}}
            for kind in KINDS]
    rows.append({"kind": "current memories", "what it is": "in the store file now",
                 **{user: len(store.records()) for user, store in stores.items()}})
    return rows


def outdated_labels(user: str = "ada", history: str | Path = HISTORY) -> set[str]:
    """The fact labels of the user's values that a later "changed value" memory replaced: the same attribute (the label
    without its last part, "city" of "city-lisbon") with another value, written earlier."""
    memories = [m for m in json.loads(Path(history).read_text(encoding="utf-8"))["memories"] if m["user"] == user]
    return {old["fact"] for n, m in enumerate(memories) if m["kind"] == "changed value" for old in memories[:n]
            if old["fact"] != m["fact"] and old["fact"].rsplit("-", 1)[0] == m["fact"].rsplit("-", 1)[0]}


def missed_pairs(proposal: Any, embedder: Embedder) -> list[tuple[str, str, float]]:
    """Pairs of memories a plan leaves as two although they state one fact by the history's label (read here for
    scoring only; the plan never reads it): distinct texts, neither ended by a conflict, not in one cluster; each with
    its cosine similarity."""
    group = {r["id"]: n for n, c in enumerate(proposal.clusters) for r in c.members}
    left = [*(r for c in proposal.clusters for r in c.members), *proposal.kept]
    out = []
    for a, b in itertools.combinations(sorted(left, key=lambda r: (r["written_at"], r["id"])), 2):
        fact = (a.get("metadata") or {}).get("fact")
        same = fact is not None and fact == (b.get("metadata") or {}).get("fact")
        together = a["id"] in group and group.get(a["id"]) == group.get(b["id"])
        if same and not together and a["content"] != b["content"]:
            va, vb = (np.asarray(v, dtype=np.float64) for v in embedder.embed([a["content"], b["content"]]))
            out.append((a["content"], b["content"], round(float(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb)), 3)))
    return out


def index_store(store_path: str | Path, index_path: str | Path, embedder: Embedder, clock: Clock, *,
                user: str = "ada", k: int = 5) -> SqliteVecMemoryStore:
    """A sqlite-vec index at `index_path` of the user's current memories in a store file (identical texts share a row)."""
    records = SelectiveMemoryStore(store_path, user=user, clock=clock).records()
    return vector_index(index_path, records, embedder, k=k)


def _text_labels(store_path: str | Path, records: Sequence[dict[str, Any]]) -> dict[str, set[str]]:
    """The fact labels of each text among `records` (a merged record's are its parents')."""
    fact_labels = labels(store_path)
    by_text: dict[str, set[str]] = {}
    for r in records:
        by_text.setdefault(r["content"], set()).update(fact_labels[r["id"]])
    return by_text


def entry_kinds(entries: Sequence[str], by_text: dict[str, set[str]], asked: str, outdated: set[str]) -> list[str]:
    """What each injected entry of one call is, for `calls_plot`'s colours: an outdated value, else a repeat of a fact
    an earlier entry of the call stated, else the fact the question asks for, else another fact."""
    seen: set[str] = set()
    out = []
    for text in entries:
        found = by_text.get(text, set())
        out.append("outdated value" if found & outdated else "repeat" if found & seen
                   else "the asked fact" if asked in found else "another fact")
        seen |= found
    return out


def ask_and_measure(state: str, store_path: str | Path, agent: Any, index: SqliteVecMemoryStore,
                    questions: Sequence[dict[str, Any]], clock: Clock, *, user: str = "ada",
                    history: str | Path = HISTORY) -> dict[str, Any]:
    """Ask `agent` every question, each in a fresh conversation, then measure that state of the store: its current
    memories and index rows, what the calls received (entries, tokens of the injected block, entries stating an
    outdated value and entries repeating a fact, by the history's labels) and recall@1 and @3 of the questions by fact
    label, as counts and rates. `agent.model` must be a `MeteredModel`, new for this agent."""
    for question in questions:
        agent.messages.clear()
        agent(question["question"])
    records = SelectiveMemoryStore(store_path, user=user, clock=clock).records()
    by_text = _text_labels(store_path, records)
    outdated = outdated_labels(user, history)
    found = ranks(questions, index.search_vectors, lambda q, text: q["fact"] in by_text.get(text, ()), k=3)
    received = [injected_entries(x["messages"]) for x in agent.model.exchanges]
    sizes = [len(e) for e in received]
    lo, hi = min(sizes, default=0), max(sizes, default=0)
    answered = {k: sum(r is not None and r <= k for r in found) for k in (1, 3)}
    return {
        "memories": state,
        "current memories": len(records),
        "index rows": index.count(),
        "entries per call": str(lo) if lo == hi else f"{lo}-{hi}",
        "tokens injected per call": round(sum(injected_tokens(x["messages"]) for x in agent.model.exchanges)
                                          / max(len(questions), 1), 1),
        "outdated values injected": sum(bool(by_text.get(t, set()) & outdated) for e in received for t in e),
        "repeated facts injected": sum(repeats(e, by_text) for e in received),
        "questions": len(questions),
        "answered@1": answered[1],
        "answered@3": answered[3],
        "recall@1": recall_at(found, 1),
        "recall@3": recall_at(found, 3),
    }


def before_after(rows: Sequence[dict[str, Any]]) -> Any:
    """The rows of `ask_and_measure` as one table, a column per state, recall as "answered of questions (rate)"."""
    import pandas as pd

    measures = ["current memories", "index rows", "entries per call", "tokens injected per call",
                "outdated values injected", "repeated facts injected", "recall@1", "recall@3"]

    def cell(row: dict[str, Any], measure: str) -> Any:
        if measure.startswith("recall@"):
            k = measure.split("@")[1]
            return f"{row[f'answered@{k}']} of {row['questions']} ({row[measure]})"
        return row[measure]

    frame = pd.DataFrame({row["memories"]: [cell(row, m) for m in measures] for row in rows}, index=measures)
    frame.index.name = "measure"
    return frame


def calls_plot(readers: dict[str, Any], stores: dict[str, str | Path], questions: Sequence[dict[str, Any]],
               clock: Clock, *, user: str = "ada", history: str | Path = HISTORY) -> Any:
    """One grid per state of the store: a row per question's call, a cell per injected entry in the order received,
    labelled with its fact and coloured by `entry_kinds`. The figure carries its one-sentence description."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    kinds = list(ENTRY_COLORS)
    outdated = outdated_labels(user, history)
    counted: dict[str, dict[str, Any]] = {}
    with plt.rc_context({"font.size": 10}):
        fig, axes = plt.subplots(1, len(readers), figsize=(7.8 * len(readers), 7.5), sharey=True)
        for ax, (state, agent) in zip(np.atleast_1d(axes), readers.items()):
            records = SelectiveMemoryStore(stores[state], user=user, clock=clock).records()
            by_text = _text_labels(stores[state], records)
            received = [injected_entries(x["messages"]) for x in agent.model.exchanges]
            width = max((len(e) for e in received), default=1)
            grid = np.full((len(received), width), np.nan)
            for row, (entries, question) in enumerate(zip(received, questions)):
                for col, kind in enumerate(entry_kinds(entries, by_text, question["fact"], outdated)):
                    grid[row, col] = kinds.index(kind)
                    text = ", ".join(sorted(by_text.get(entries[col], set()))) or "?"
                    ax.text(col, row, text, ha="center", va="center", fontsize=8,
                            color="white" if kind in ("outdated value", "the asked fact") else "black")
            ax.imshow(grid, cmap=ListedColormap(list(ENTRY_COLORS.values())), vmin=-0.5, vmax=len(kinds) - 0.5,
                      aspect="auto")
            ax.set_xticks(range(width), [str(n + 1) for n in range(width)])
            ax.set_xticks(np.arange(-0.5, width), minor=True)
            ax.set_yticks(np.arange(-0.5, len(received)), minor=True)
            ax.grid(which="minor", color="white", linewidth=2)
            ax.tick_params(which="minor", length=0)
            ax.set_xlabel("injected entry, in the order received")
            ax.set_title(f"{state} the job")
            counted[state] = {
                "outdated": sum(bool(by_text.get(t, set()) & outdated) for e in received for t in e),
                "repeats": sum(repeats(e, by_text) for e in received),
                "repeated": sorted({label for e in received for n, t in enumerate(e)
                                    for label in by_text.get(t, set())
                                    if any(label in by_text.get(u, set()) for u in e[:n])}),
                "first": sum(bool(e) and q["fact"] in by_text.get(e[0], set()) for e, q in zip(received, questions)),
                "calls": len(received),
            }
        first = np.atleast_1d(axes)[0]
        first.set_yticks(range(len(questions)), [q["question"] for q in questions])
        names = {"repeat": "repeats a fact already in the call", "the asked fact": "the fact the question asks"}
        fig.legend(handles=[Patch(color=c, label=names.get(k, k)) for k, c in ENTRY_COLORS.items()],
                   loc="lower center", ncol=len(kinds), frameon=False)
        fig.suptitle("What each held-out question's call received, labelled by fact")
        fig.tight_layout(rect=(0, 0.05, 1, 1))
    def which(repeated: list[str]) -> str:
        return ", ".join(repeated) if len(repeated) <= 3 else f"{len(repeated)} facts"

    parts = [f"{state}, {c['outdated']} entries state an outdated value, {c['repeats']} repeat a fact already in "
             f"the call ({which(c['repeated'])}) and {c['first']} calls of {c['calls']} get the asked fact first"
             for state, c in counted.items()]
    return describe_figure(fig, f"Two grids of the entries each held-out question's call received, coloured by "
                                f"kind: {'; '.join(parts)}.")

def main(argv: list[str] | None = None) -> int:
    """Print the chosen threshold and its scores on the tuning and held-out pairs."""
    parser = argparse.ArgumentParser(prog="python -m companion.measure.consolidation_eval",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from companion.models.embeddings import make_embedder

    report = threshold_report(make_embedder("minilm"))
    report.pop("pairs")
    print(json.dumps(report, indent=2) if args.json else
          "\n".join(f"{k}: {v}" for k, v in report.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ---------------------------------------------------------------------- notebook 15's third cold read

def store_kinds(stores: dict[str, SelectiveMemoryStore], history: str | Path = HISTORY) -> list[dict[str, Any]]:
    """`kinds_explained` with "unrelated" counted as "new" (each is a fact stated for the first time): four kinds that
    add up to each user's current memories, then that row."""
    rows = kinds_explained(stores, history)
    by_kind = {row["kind"]: row for row in rows}
    unrelated = by_kind.pop("unrelated")
    for user in stores:
        by_kind["new"][user] += unrelated[user]
    return list(by_kind.values())


def measure_states(states: dict[str, str | Path], reader: Callable[[SqliteVecMemoryStore], Any],
                   questions: Sequence[dict[str, Any]], embedder: Embedder, clock: Clock, workspace_dir: str | Path,
                   *, user: str = "ada") -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, SqliteVecMemoryStore]]:
    """For each state of the store ({name: store file}): index the user's current memories in
    `workspace_dir/index-<name>.sqlite` (`index_store`), build a reading agent with `reader(index)` (its model must be
    a new `MeteredModel`), ask every question in a fresh conversation and measure (`ask_and_measure`).
    Returns the rows, the agents and the indexes, each by state."""
    rows, readers, indexes = [], {}, {}
    for state, path in states.items():
        indexes[state] = index_store(path, Path(workspace_dir) / f"index-{state}.sqlite", embedder, clock, user=user)
        readers[state] = reader(indexes[state])
        rows.append(ask_and_measure(state, path, readers[state], indexes[state], questions, clock, user=user))
    return rows, readers, indexes


def before_after_table(rows: Sequence[dict[str, Any]]) -> Any:
    """`before_after` without the tokens row: memories, index rows, entries per call, outdated values and repeats
    injected, recall@1 and @3."""
    frame = before_after(rows)
    return frame.drop(index="tokens injected per call")


def still_two(store_path: str | Path, embedder: Embedder, clock: Clock, *, user: str = "ada") -> list[tuple[str, str, float]]:
    """Pairs of the user's current memories that state one fact by the history's label (a merged record's are its
    parents'), in different words: what the job left as two memories, each with its cosine similarity."""
    records = SelectiveMemoryStore(store_path, user=user, clock=clock).records()
    fact_labels = labels(store_path)
    out = []
    for a, b in itertools.combinations(records, 2):
        if fact_labels[a["id"]] & fact_labels[b["id"]] and a["content"] != b["content"]:
            va, vb = (np.asarray(v, dtype=np.float64) for v in embedder.embed([a["content"], b["content"]]))
            out.append((a["content"], b["content"], round(float(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb)), 3)))
    return out
