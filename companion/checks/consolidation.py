"""Notebook 15's ledger: a consolidation job between sessions, checked on disk, at the model and against the history.

The evidence never comes from the lesson's tables or from the job's own report (its steps):
- the threshold is chosen again here from the labelled pairs, each text embedded on its own (the lesson's report embeds
  them in batches), over a grid of 1,001 thresholds;
- the store files before and after the job, and the index after it, are read from the workspace (`json`, `sqlite3`);
- what each summary call and each question's call received and answered is read at the model (a `MeteredModel`'s
  `exchanges`), the `<memory>` block line by line (not with the lesson's entry parser);
- which fact an entry states comes from the history's labels (`history.json`), not from the fact reader the job uses;
- recall is searched again on the same indexes and judged by the answer's word, not by the fact label.
What the lesson showed (its two accuracies, its steps, its before-and-after table) is kept beside the recount.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from companion.checks import save_record
from companion.measure import consolidation_eval as evaluation
from companion.memory.consolidation import compatible
from companion.models.backends import resolve_backend, resolve_bedrock_endpoint
from companion.support.ledger import Ledger

CLAIMS = {
    "C1": "consolidation shrinks the store, no call receives an outdated value, and held-out recall does not fall",
    "S1": "the merge threshold is chosen on tuning pairs and scored on held-out pairs it never saw",
    "S2": "a changed value is settled by recency; nothing is deleted; other users are untouched",
    "S3": "a cluster becomes one memory: the model's line if it states every fact, else the newest member's words",
    "S4": "after the job: fewer memories, no outdated value, fewer repeats, recall kept",
}

_FACT = re.compile(r"the user's ([a-z ]+?) (?:is|=) ([^.\n]+)", re.IGNORECASE)  # a reader of this module's own


def _stated(text: str | None) -> dict[str, str]:
    return {key.lower(): value.strip().lower() for key, value in _FACT.findall(text or "")}


def _pairs(path: Path, embedder: Any) -> list[dict[str, Any]]:
    """The labelled pairs of a file, each text embedded on its own, with whether the fact reader lets them merge."""
    out = []
    for pair in evaluation.read_jsonl(path):
        a, b = (np.asarray(embedder.embed([t])[0], dtype=np.float64) for t in (pair["a"], pair["b"]))
        out.append({"a": pair["a"], "b": pair["b"], "duplicate": pair["duplicate"],
                    "cosine": round(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), 6),
                    "compatible": compatible(pair["a"], pair["b"])})
    return out


def _records(path: Path) -> list[dict[str, Any]]:
    """Every record of a store file, read with `json`: the fields the checks read."""
    rows = []
    for r in json.loads(Path(path).read_text(encoding="utf-8")):
        meta = r.get("metadata") or {}
        lineage = meta.get("lineage") or {}
        replaced = lineage.get("replaced_by") or {}
        rows.append({"id": r["id"], "user": r["user"], "content": r["content"], "written_at": r["written_at"],
                     "valid_until": r["valid_until"], "superseded_by": r["superseded_by"], "fact": meta.get("fact"),
                     "derived": lineage.get("derived"), "job": lineage.get("job"), "parents": lineage.get("parents"),
                     "replaced_by": {k: replaced.get(k) for k in ("id", "rule")} if replaced else None,
                     "source": (meta.get("consolidation") or {}).get("source")})
    return rows


def _entries(messages: list[dict[str, Any]]) -> list[str]:
    """A call's `<memory>` entries, read line by line."""
    last = next(m for m in reversed(messages) if m["role"] == "user")
    block = next((b["text"] for b in last["content"] if "<memory>" in b.get("text", "")), "")
    return [html.unescape(line.split(">", 1)[1].rsplit("</entry>", 1)[0]).strip()
            for line in block.splitlines() if line.startswith("<entry")]


def _members(messages: list[dict[str, Any]]) -> list[str]:
    """The memories a summary call received, in its order (each follows a `[user]` marker block)."""
    blocks = [b.get("text", "") for b in messages[-1]["content"]]
    return [blocks[i + 1] for i, b in enumerate(blocks[:-1]) if b == "\n---\n[user]"]


def record(report: dict[str, Any], steps: list[Any], summary_model: Any, readers: dict[str, Any],
           indexes: dict[str, Any], embedder: Any, rows: list[dict[str, Any]], *, chosen: bool,
           backend: str | None, workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 15's run. `report` is the lesson's threshold report, `steps` the job's steps,
    `summary_model` the `MeteredModel` of the summary calls, `readers` and `indexes` map "before" and "after" to the
    reading agent and its index, `rows` is the before-and-after table the lesson showed; `chosen` is False when the
    threshold was set by hand."""
    workspace_dir = Path(workspace_dir)
    questions = evaluation.read_jsonl(evaluation.QUESTIONS)
    index_rows = {}
    for state in ("before", "after"):
        with sqlite3.connect(workspace_dir / f"index-{state}.sqlite") as db:
            index_rows[state] = db.execute("SELECT count(*) FROM memories").fetchone()[0]
    return save_record({
        "offline_rules": resolve_backend(backend) == "offline" or resolve_bedrock_endpoint() == "local",
        "chosen_by_hand": not chosen,
        "threshold": report["threshold"],
        "chosen": report["chosen"],
        "pairs": {"tuning": _pairs(evaluation.TUNING, embedder), "held-out": _pairs(evaluation.HELDOUT, embedder)},
        "history": json.loads(evaluation.HISTORY.read_text(encoding="utf-8"))["memories"],
        "before": _records(workspace_dir / "memories-before.json"),
        "after": _records(workspace_dir / "memories.json"),
        "index_rows": index_rows,
        "summaries": [{"members": _members(x["messages"]), "reply": x["reply"]} for x in summary_model.exchanges],
        "reads": {state: [{"entries": _entries(x["messages"])} for x in agent.model.exchanges]
                  for state, agent in readers.items()},
        "answer_ranks": {state: evaluation.ranks(questions, index.search_vectors,
                                                 lambda q, text: evaluation.says(text, q["answer"]), k=3)
                         for state, index in indexes.items()},
        "shown": {"accuracy": {name: report[name]["accuracy"] for name in ("tuning", "held-out")},
                  "steps": [{"kind": s.kind, "record": s.record, "source": s.source} for s in steps],
                  "rows": rows},
    }, workspace_dir)


def _merged(pairs: list[dict[str, Any]], threshold: float) -> list[bool]:
    return [p["cosine"] >= threshold and p["compatible"] for p in pairs]


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 15, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    threshold, chosen = record["threshold"], record["chosen"]
    tuning, held = record["pairs"]["tuning"], record["pairs"]["held-out"]

    def right(pairs: list[dict[str, Any]], t: float) -> int:
        return sum(m == p["duplicate"] for m, p in zip(_merged(pairs, t), pairs))

    grid = [round(t, 3) for t in np.arange(0.0, 1.0005, 0.001)]
    best = max(right(tuning, t) for t in grid)
    ledger.check("S1", "no threshold decides more tuning pairs right than the chosen one (each text embedded alone)",
                 evidence=f"chosen {chosen}: {right(tuning, chosen)} of {len(tuning)} right; best of {len(grid)} "
                          f"thresholds 0.000-1.000: {best}",
                 holds=right(tuning, chosen) == best)
    accuracy = {name: round(right(pairs, threshold) / len(pairs), 3) if pairs else None
                for name, pairs in (("tuning", tuning), ("held-out", held))}
    ledger.equal("S1", "the printed accuracies, tuning and held-out, recomputed with each text embedded alone",
                 observed=record["shown"]["accuracy"], expected=accuracy, what=f"pairs decided right at {threshold}")
    shared = {frozenset((p["a"], p["b"])) for p in tuning} & {frozenset((p["a"], p["b"])) for p in held}
    ledger.check("S1", "no held-out pair is a tuning pair",
                 evidence=f"{len(held)} held-out pairs, {len(tuning)} tuning pairs; in both: {len(shared)}",
                 holds=bool(held) and not shared)
    ada = [m for m in record["history"] if m["user"] == "ada"]
    label = {m["content"]: m["fact"] for m in ada}
    before, after = record["before"], record["after"]
    before_by, after_by = {r["id"]: r for r in before}, {r["id"]: r for r in after}
    now = [r for r in after if r["user"] == "ada" and r["valid_until"] is None]
    was = [r for r in before if r["user"] == "ada" and r["valid_until"] is None]

    def labels_of(r: dict[str, Any], seen: frozenset = frozenset()) -> set[str]:
        own = {r["fact"]} if r["fact"] else set()
        return own.union(*(labels_of(after_by[p], seen | {r["id"]}) for p in r["parents"] or []
                           if p in after_by and p not in seen))

    changed = {frozenset((old["fact"], m["fact"])) for n, m in enumerate(ada) if m["kind"] == "changed value"
               for old in ada[:n] if old["fact"] != m["fact"] and old["fact"].split("-")[0] == m["fact"].split("-")[0]}
    newest = {m["fact"] for m in ada if m["kind"] == "changed value"}
    outdated = {f for pair in changed for f in pair} - newest
    current_labels = set().union(*(labels_of(r) for r in now)) if now else set()
    ledger.check("S2", "after the job no current memory states an outdated value, and each newest value is current",
                 evidence=f"outdated values (history labels): {sorted(outdated)}, still current: "
                          f"{sorted(outdated & current_labels)}; newest values current: "
                          f"{sorted(newest & current_labels)} of {sorted(newest)}",
                 holds=bool(newest) and not outdated & current_labels and newest <= current_labels)
    ended = [r for r in after if r["id"] in before_by and before_by[r["id"]]["valid_until"] is None
             and r["valid_until"] is not None]

    def stands_for(r: dict[str, Any]) -> dict[str, Any]:
        seen = set()
        while r["superseded_by"] and r["id"] not in seen:
            seen.add(r["id"])
            r = after_by.get(r["superseded_by"], r)
        return r

    named = [r for r in ended if (r["replaced_by"] or {}).get("id") == r["superseded_by"]]
    reach = [r for r in ended if stands_for(r)["valid_until"] is None]
    ledger.check("S2", "every ended memory names what replaced it, leading to a current memory",
                 evidence=f"{len(ended)} ended; naming its replacement: {len(named)}; leading to a current record: "
                          f"{len(reach)}",
                 holds=bool(ended) and len(named) == len(reach) == len(ended))
    replies = {tuple(s["members"]): s["reply"] for s in record["summaries"]}

    def states_all(reply: str | None, members: list[str]) -> bool:
        wanted: dict[str, str] = {}
        for text in members:
            wanted.update(_stated(text))
        said = _stated(reply)
        return bool(said) and all(said.get(k) == v for k, v in wanted.items())

    def own_reply(r: dict[str, Any]) -> str | None:
        return replies.get(tuple(before_by[p]["content"] for p in r["parents"] or [] if p in before_by))

    def rule(ended_record: dict[str, Any]) -> str:
        new = after_by[ended_record["superseded_by"]]
        if new["id"] in before_by:
            pair = frozenset((label.get(ended_record["content"]), label.get(new["content"])))
            newer = (new["written_at"], new["id"]) > (ended_record["written_at"], ended_record["id"])
            return "newest value" if newer and pair in changed else "?"
        parents = [before_by[p] for p in new["parents"] or [] if p in before_by]
        if states_all(own_reply(new), [p["content"] for p in parents]):
            return "model summary"
        youngest = max(parents, key=lambda p: (p["written_at"], p["id"]), default=None)
        return "newest member" if youngest and new["content"] == youngest["content"] else "?"

    offline = record["offline_rules"]
    recomputed = {r["id"]: rule(r) for r in ended if offline or r["superseded_by"] in before_by}
    named_rule = {r["id"]: (r["replaced_by"] or {}).get("rule") for r in ended}
    ledger.check("S2", "every ended memory names the rule that replaced it (recomputed here)",
                 evidence=f"named: {dict(Counter(named_rule.values()))}; recomputed from the history's labels, "
                          f"recency and the recorded replies: "
                          f"{sum(named_rule[i] == v for i, v in recomputed.items())} of {len(recomputed)} agree"
                          + ("" if offline else " (merges not recomputed: a real model's wording)"),
                 holds=bool(recomputed) and all(named_rule[i] == v for i, v in recomputed.items()))
    lost = [r["id"] for r in before if r["id"] not in after_by or after_by[r["id"]]["content"] != r["content"]]
    ledger.check("S2", "nothing was deleted: every record before the job is in the file after, with its text",
                 evidence=f"{len(before)} records before, {len(after)} after; missing or changed: {lost}",
                 holds=bool(before) and not lost)
    others = {when: [r for r in rows if r["user"] != "ada"] for when, rows in (("before", before), ("after", after))}
    ledger.check("S2", "the job leaves every other user's memories as they were",
                 evidence=f"records of {sorted({r['user'] for r in others['before']})}: {len(others['before'])} "
                          f"before, {len(others['after'])} after, identical: {others['before'] == others['after']}",
                 holds=bool(others["before"]) and others["before"] == others["after"])

    merges = [r for r in now if r["job"] == "consolidation" and r["id"] not in before_by]
    ledger.equal("S3", "the model was asked once per cluster", observed=len(record["summaries"]),
                 expected=len(merges), what="summary calls received by the model, merged records in the file")
    from_summary = [r for r in merges if r["source"] == "model summary"]
    real = "a real model's summary wording may be read differently by the two readers"
    if offline:
        as_replied = [r for r in from_summary if _stated(r["content"]) and _stated(r["content"]) == _stated(own_reply(r))]
        ledger.check("S3", "a memory written from a summary states what its own cluster's reply stated",
                     evidence=f"{len(from_summary)} written from a summary; stating the facts of the recorded reply "
                              f"to its parents' texts (read with a regex): {len(as_replied)}",
                     holds=bool(from_summary) and len(as_replied) == len(from_summary))
        agree = [(r["source"] == "model summary") == states_all(own_reply(r), [before_by[p]["content"] for p in
                 r["parents"] or [] if p in before_by]) for r in merges]
        ledger.check("S3", "a summary is kept only when it states every fact its members state",
                     evidence=f"{len(merges)} merges; the file's text source agrees with the recorded reply (regex): "
                              f"{sum(agree)}",
                     holds=bool(merges) and all(agree))
    else:
        for claim in ("a memory written from a summary states what its own cluster's reply stated",
                      "a summary is kept only when it states every fact its members state"):
            ledger.skip("S3", claim, reason=real)
    shown_sources = Counter(s["source"] for s in record["shown"]["steps"] if s["kind"] == "merge")
    ledger.equal("S3", "the steps table shows the text source the file records for each merge",
                 observed=dict(shown_sources), expected=dict(Counter(r["source"] for r in merges)),
                 what="merges by text source")
    parent_labels = [{before_by[p]["fact"] for p in r["parents"] or [] if p in before_by} for r in merges]
    claim = "no merge joined two facts, by fact label"
    if record["chosen_by_hand"]:
        ledger.skip("S3", claim, reason=f"merge_threshold {threshold} was set by hand; the claim is about the chosen one")
    else:
        ledger.check("S3", claim, evidence=f"{len(merges)} merged memories; their parents carry one label each: "
                                           f"{sum(len(f) == 1 for f in parent_labels)}",
                     holds=bool(merges) and all(len(f) == 1 for f in parent_labels))

    table = {row["memories"]: row for row in record["shown"]["rows"]}
    ledger.check("C1 S4", "the job leaves fewer current memories",
                 evidence=f"{len(was)} current records before, {len(now)} after (read from the two files)",
                 holds=len(now) < len(was))
    distinct = {"before": len({r["content"] for r in was}), "after": len({r["content"] for r in now})}
    ledger.equal("S4", "each index holds one row per distinct current memory: identical texts share a row",
                 observed=record["index_rows"], expected=distinct,
                 what="rows in index-before.sqlite and index-after.sqlite (sqlite3), distinct current texts (json)")
    ledger.equal("S4", "the table's memories and index rows are the files' and the indexes'",
                 observed=[[table.get(s, {}).get(k) for k in ("current memories", "index rows")]
                           for s in ("before", "after")],
                 expected=[[len(was), record["index_rows"]["before"]], [len(now), record["index_rows"]["after"]]],
                 what="current memories and index rows, before and after")
    ranks = record["answer_ranks"]
    hits = {(state, k): sum(r is not None and r <= k for r in ranks[state]) for state in ("before", "after")
            for k in (1, 3)}
    recall = {key: round(n / len(ranks[key[0]]), 3) for key, n in hits.items()}
    ledger.check("C1 S4", "recall@1 and @3 on held-out questions do not fall",
                 evidence="the same indexes searched again, hits judged by the answer's word: "
                          + ", ".join(f"{state} @{k} {hits[state, k]} of {len(ranks[state])} ({value})"
                                      for (state, k), value in recall.items()),
                 holds=all(recall["after", k] >= recall["before", k] for k in (1, 3)))
    ledger.equal("S4", "recall by the answer's word equals the table's recall by fact label, counts and rates",
                 observed=[[table.get(s, {}).get(f"answered@{k}"), table.get(s, {}).get("questions"),
                            table.get(s, {}).get(f"recall@{k}")] for s in ("before", "after") for k in (1, 3)],
                 expected=[[hits[s, k], len(ranks[s]), recall[s, k]] for s in ("before", "after") for k in (1, 3)],
                 what="questions answered, questions and recall, @1 and @3, before and after")
    tuning_pairs = {frozenset((p["a"], p["b"])) for p in tuning}
    same = [frozenset(p) for p in itertools.combinations(sorted(label), 2) if len({label[t] for t in p}) == 1]
    in_tuning = sum(p in tuning_pairs for p in same)
    ledger.check("S4", "most of the history's restatement pairs are tuning pairs word for word",
                 evidence=f"{in_tuning} of {len(same)} pairs of ada's memories with one fact label",
                 holds=bool(same) and in_tuning * 2 > len(same))
    reads = {state: [call["entries"] for call in calls] for state, calls in record["reads"].items()}
    stale = {state: sum(label.get(text) in outdated for entries in calls for text in entries)
             for state, calls in reads.items()}
    shown_stale = [table.get(s, {}).get("outdated values injected") for s in reads]
    ledger.check("C1 S4", "outdated values injected: some before, none after, as the table says (history labels)",
                 evidence=f"entries stating {sorted(outdated)}, by the history's label of each text the calls "
                          f"received: {stale}; the table: {shown_stale}",
                 holds=stale.get("before", 0) > 0 and stale.get("after") == 0 and shown_stale == list(stale.values()))
    repeated = {state: sum(n - 1 for entries in calls for n in Counter(map(label.get, entries)).values())
                for state, calls in reads.items()}
    unlabelled = sorted({t for calls in reads.values() for entries in calls for t in entries} - set(label))
    ledger.check("S4", "fewer injected entries repeat a fact the call already has",
                 evidence=f"recounted from the calls, labelled from the history by text: {repeated}; texts not in "
                          f"the history: {unlabelled}; the table: "
                          f"{[table.get(s, {}).get('repeated facts injected') for s in reads]}",
                 holds=not unlabelled and repeated.get("after", 0) < repeated.get("before", 0)
                 and [repeated[s] for s in reads] == [table.get(s, {}).get("repeated facts injected") for s in reads])
    wasted = {state: sum(any(label.get(t) in outdated for t in entries)
                         or len({label.get(t) for t in entries}) < len(entries) for entries in calls)
              for state, calls in reads.items()}
    ledger.check("S4", "before the job, most calls received an outdated value or a fact twice",
                 evidence="calls with either, by the history's labels: " + ", ".join(
                     f"{state} {n} of {len(reads[state])}" for state, n in wasted.items()),
                 holds=wasted.get("before", 0) * 2 > len(reads.get("before", [])))
    sizes = {state: sorted({len(entries) for entries in calls}) for state, calls in reads.items()}
    ledger.check("S4", "every call received five entries, before and after",
                 evidence=f"entries per call, read line by line: {sizes}; the table: "
                          f"{[table.get(s, {}).get('entries per call') for s in reads]}",
                 holds=all(v == [5] for v in sizes.values())
                 and [table.get(s, {}).get("entries per call") for s in reads] == ["5", "5"])
    current_labels_of = Counter(f for r in now for f in labels_of(r))
    apart = sorted(f for f, n in current_labels_of.items() if n > 1)
    repeated_after = sorted({label.get(t) for entries in reads.get("after", []) for n, t in enumerate(entries)
                             if label.get(t) in {label.get(u) for u in entries[:n]}})
    ledger.check("S4", "the repeats left after the job are restatements it left as two memories",
                 evidence=f"facts with two current memories after the job (history labels): {apart}; facts "
                          f"repeated within a call after it: {repeated_after}",
                 holds=set(repeated_after) <= set(apart))
    return ledger
