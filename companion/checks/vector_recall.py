"""Notebook 06's ledger: keyword and embedding search on one paraphrase, a memory stored by one agent and recalled by a
fresh one, and recall over the evaluation pairs, each checked by a second method.

The evidence never comes from the lesson's tables: cosines are recomputed with numpy from fresh embeddings of the
store's texts (found a second way: the data file's earlier memories and the agent's `add_memory` calls in the session
files), keyword rankings with SQL on the store's FTS5 index and from the SDK file store's markdown files, what each
model call received from a `MeteredModel`'s exchanges, the stored rows with SQL on a connection of their own, and the
sessions from their message files. The 44 questions are ranked again with one numpy matrix product and with an FTS5
table of their own. The table the lesson showed is recorded as it was shown, to be compared with those recounts.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from strands import Agent
from strands.memory import MemoryManager
from strands.storage.search.keyword import STOP_WORDS, tokenize

from companion.checks import save_record
from companion.measure.recall_eval import content_words
from companion.memory.vector_store import SqliteVecMemoryStore, connect, keyword_query
from companion.models.backends import resolve_bedrock_endpoint
from companion.models.metering import MeteredModel
from companion.models.offline_model import OfflineModel
from companion.sessions.session_files import message_files, read_json
from companion.support.ledger import Ledger

CLAIMS = {
    "C1": "keyword search ranks the paraphrase's answer below an irrelevant memory, embedding search first, "
          "and a fresh agent answers from it",
    "S1": "MemoryManager takes any object with the five attributes and async search",
    "S2": "keyword search ranks by shared words, embedding search by meaning",
    "S3": "the agent stores a memory with add_memory: one row per text in a SQLite file",
    "S4": "a fresh agent answers from the injected memories: up to 5, minus those below min_score",
    "S5": "injection adds memories to one call, not to the stored history",
    "S6": "over the 44 pairs, vector search beats keyword search, and keyword search has no shared word to find",
}
INJECTED = 5  # the SDK's default number of memories injected per call (MemoryInjectionConfig.max_entries)


def _inputs(model: MeteredModel) -> list[str]:
    """What each recorded call received, as one JSON text: messages, system prompt and tool specs."""
    return [json.dumps([e["messages"], e["system_prompt"], e["tool_specs"]], default=str) for e in model.exchanges]


def _messages(storage_dir: Path, session_id: str) -> list[dict[str, Any]]:
    """A session's messages, read from its message files, in order."""
    return [read_json(path)["message"] for path in message_files(storage_dir, session_id)]


def _tool_uses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each add_memory call in a session's files: its id, entries, result status and the messages it came from (the
    user's turn before it, then the call), with their tracking ids."""
    status = {b["toolResult"]["toolUseId"]: b["toolResult"]["status"]
              for m in messages for b in m["content"] if "toolResult" in b}
    turns = [i for i, m in enumerate(messages) if m["role"] == "user" and "text" in m["content"][0]]
    uses = []
    for i, message in enumerate(messages):
        for block in message["content"]:
            use = block.get("toolUse")
            if use and use["name"] == "add_memory":
                said_in = [max(t for t in turns if t < i), i]
                uses.append({"tool_use_id": use["toolUseId"], "entries": list(use["input"]["entries"]),
                             "status": status.get(use["toolUseId"]), "messages": said_in,
                             "message_ids": [messages[k].get("tracking_id") for k in said_in]})
    return uses


def _sdk_scored(question: str, notes: dict[str, str]) -> list[tuple[str, int]]:
    """The SDK file store's rule, recomputed: the question's words minus stop words found in a file's name and text,
    counted; ties in file-name order; files with no such word left out. (memory, score), best first."""
    kept = tokenize(question) - STOP_WORDS
    scores = {stem: len(kept & tokenize(f"{stem} {text}")) for stem, text in notes.items()}
    return [(notes[s].strip(), scores[s]) for s in sorted(scores, key=lambda s: (-scores[s], s)) if scores[s]]


def _sdk_ranking(question: str, notes: dict[str, str]) -> list[str]:
    """The memories in the SDK file store's order, recomputed (`_sdk_scored` without the scores)."""
    return [memory for memory, _ in _sdk_scored(question, notes)]


def _rank(order: list[str], text: str) -> int | None:
    """Where `text` ranks in `order`, from 1 (None: not there)."""
    return order.index(text) + 1 if text in order else None


def _ranks(pairs: list[dict[str, str]], embedder: Any) -> tuple[list[int], list[int | None]]:
    """Where each pair's fact ranks among all the facts: by one numpy matrix product, and by BM25 on an FTS5 table of
    its own (None: no shared word)."""
    facts = list(dict.fromkeys(p["fact"] for p in pairs))
    scores = embedder.embed([p["query"] for p in pairs]) @ embedder.embed(facts).T
    vector = [int((row > row[facts.index(p["fact"])]).sum()) + 1 for row, p in zip(scores, pairs)]
    db, _ = connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE facts USING fts5(content, tokenize='unicode61 remove_diacritics 2')")
    db.executemany("INSERT INTO facts (content) VALUES (?)", [(f,) for f in facts])
    keyword: list[int | None] = []
    for pair in pairs:
        found = [c for (c,) in db.execute("SELECT content FROM facts WHERE facts MATCH ? ORDER BY bm25(facts)",
                                          (keyword_query(pair["query"]),))]
        keyword.append(found.index(pair["fact"]) + 1 if pair["fact"] in found else None)
    db.close()
    return vector, keyword


def record(memories: Any, *, query: str, top_k: int, min_score: float, embedder: Any, agents: dict[str, Agent],
           store: Any, ranked: list[dict[str, Any]], bars: Any, pairs: list[dict[str, str]], result: dict[str, Any],
           workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 06's run. `agents` maps "probe" (on the numpy `store`), "writer" (session 1) and
    "reader" (session 2) to their agents; `ranked` is the table of the three searches the lesson showed (each
    search's first `top_k` rows and the answer's row), `bars` its bar chart and `result` its evaluation of `pairs`."""
    workspace_dir = Path(workspace_dir)
    sessions, path = workspace_dir / "sessions", workspace_dir / "memory.db"
    monday = _messages(sessions, "monday-chat")
    uses = _tool_uses(monday)
    entries = [e for u in uses for e in u["entries"]]
    texts = list(dict.fromkeys([*memories.memories, *entries]))  # what the cosines are computed for
    stored = list(dict.fromkeys([*memories.earlier, *entries]))  # what the store should hold: code's, then the agent's
    text_vectors = embedder.embed(texts)  # fresh embeddings, not the store's

    def cosines(question: str) -> dict[str, float]:
        return dict(zip(texts, (text_vectors @ embedder.embed([question])[0]).tolist()))

    db, _ = connect(path)  # a connection of its own to the store's file
    by_bm25 = ("SELECT content, -bm25(memory_keywords) FROM memory_keywords WHERE memory_keywords MATCH ? "
               "ORDER BY bm25(memory_keywords)")
    fts = {name: db.execute(by_bm25, (keyword_query(q),)).fetchall()
           for name, q in (("query", query), ("data_query", memories.query))}
    rows = [[str(i), c, json.loads(m)] for i, c, m in db.execute("SELECT id, content, metadata FROM memories")]
    db.close()
    notes = {p.stem: p.read_text(encoding="utf-8") for p in (workspace_dir / "notes").rglob("*.md")}
    inner = agents["reader"].model.inner
    with SqliteVecMemoryStore(path, embedder, name="user-memory", max_search_results=top_k) as reopened:
        unlimited = MeteredModel(inner)  # the same injection on the file, with no threshold
        Agent(model=unlimited, callback_handler=None,
              memory_manager=MemoryManager(stores=[reopened], search_tool_config=False, injection=True))(query)
        reopened_count = reopened.count()
    vector_ranks, keyword_ranks = _ranks(pairs, embedder)
    axes = bars.axes[0]
    reader = agents["reader"]
    return save_record({
        "query": query, "data_query": memories.query, "answer": memories.expected, "top_k": top_k,
        "min_score": min_score, "data_texts": list(memories.memories), "earlier": list(memories.earlier),
        "offline_rules": isinstance(inner, OfflineModel) or resolve_bedrock_endpoint() == "local",
        "texts": texts, "stored": stored,
        "cosines": {"query": cosines(query), "data_query": cosines(memories.query)},
        "fts": {name: [[c, s] for c, s in found] for name, found in fts.items()},
        "notes": notes,
        "shown": [{"search": row["search"], "rank": int(row["rank"]), "score": float(row["score"]),
                   "memory": row["memory"]} for row in ranked],
        "bars": {"widths": [bar.get_width() for bar in axes.containers[0]],
                 "names": [t.get_text().split(". ", 1)[1].rstrip("…") for t in axes.get_yticklabels()]},
        "numpy_store": {"classes": [c.__name__ for c in type(store).__mro__],
                        "received": _inputs(agents["probe"].model)},
        "monday": {"uses": uses, "rows": rows, "reopened_count": reopened_count},
        "thursday": {"files": [p.read_text(encoding="utf-8") for p in message_files(sessions, "thursday-chat")],
                     "received": _inputs(reader.model), "reply": reader.model.exchanges[-1]["reply"],
                     "unlimited": _inputs(unlimited)},
        "recall": {"pairs": pairs, "result": result, "vector_ranks": vector_ranks, "keyword_ranks": keyword_ranks},
    }, workspace_dir)


def _seen(texts: list[str], received: list[str]) -> list[str]:
    """The memory texts in anything the model received, escaped or not, in `texts` order."""
    sent = "".join(received)
    return [t for t in texts if t in sent or html.escape(t) in sent]


def _scores(ranks: list[int | None]) -> dict[str, float]:
    """recall@1, recall@3 and MRR, as the evaluation defines and rounds them."""
    n = len(ranks)
    return {"recall@1": round(sum(r == 1 for r in ranks) / n, 4),
            "recall@3": round(sum(r is not None and r <= 3 for r in ranks) / n, 4),
            "mrr": round(sum(1 / r for r in ranks if r) / n, 4)}


def claims(record: dict[str, Any]) -> Ledger:
    """Every check of notebook 06, decided from `record` alone."""
    ledger = Ledger(claims=CLAIMS)
    answer, data_texts, stored = record["answer"], record["data_texts"], record["stored"]
    top_k, min_score = record["top_k"], record["min_score"]

    # The claim, on the data file's own paraphrase, so it holds whatever `query` the learner sets.
    own = {t: s for t, s in record["cosines"]["data_query"].items() if t in data_texts}
    first = max(own, key=own.get)
    ledger.check("C1 S2", "an embedding search ranks the paraphrase's answer first",
                 evidence=f"numpy cosine of {record['data_query']!r}: best {own[first]:.3f} {first!r}",
                 holds=first == answer)
    fts_order = [c for c, _ in record["fts"]["data_query"] if c in data_texts]
    ledger.check("C1 S2", "FTS5 ranks it below an irrelevant memory",
                 evidence=f"SQL bm25 order: the answer ranks {_rank(fts_order, answer)}; first: {fts_order[:1]}",
                 holds=bool(fts_order) and fts_order[0] != answer)
    sdk_order = _sdk_ranking(record["data_query"], record["notes"])
    ledger.check("C1 S2", "the SDK's keyword search ranks it below an irrelevant memory",
                 evidence=f"recomputed from the markdown files: the answer ranks {_rank(sdk_order, answer)}; "
                          f"first: {sdk_order[:1]}",
                 holds=bool(sdk_order) and sdk_order[0] != answer)

    # The table the lesson showed for `query`: each search's first top_k rows, and the answer's row.
    everything = record["cosines"]["query"]
    fresh = {t: everything[t] for t in stored if t in everything}  # the store's memories, by numpy cosine
    best_first = sorted(fresh, key=fresh.get, reverse=True)
    rows = {name: [r for r in record["shown"] if r["search"] == name]
            for name in ("SDK file store", "FTS5 (BM25)", "vector (cosine)")}

    def top(name: str) -> list[tuple[str, float]]:
        return [(r["memory"], r["score"]) for r in rows[name] if r["rank"] <= top_k]

    shown_vector = top("vector (cosine)")
    ledger.check("S2", "the vector rows are the top_k memories by numpy cosine, with their scores",
                 evidence=[f"{s:.4f} vs {fresh.get(c, float('nan')):.4f}" for c, s in shown_vector],
                 holds=[c for c, _ in shown_vector] == best_first[:top_k]
                 and all(abs(s - fresh[c]) < 1e-3 for c, s in shown_vector))
    sql = record["fts"]["query"]
    shown_fts = top("FTS5 (BM25)")
    ledger.check("S2", "the FTS5 rows and scores are SQL's bm25 of the ORed query",
                 evidence=[f"{s:.4f}" for _, s in sql[:top_k]],
                 holds=[c for c, _ in shown_fts] == [c for c, _ in sql[:top_k]]
                 and all(abs(a - b) < 1e-3 for (_, a), (_, b) in zip(shown_fts, sql)))
    sdk_scored = _sdk_scored(record["query"], record["notes"])
    shown_sdk = top("SDK file store")
    ledger.check("S2", "the SDK file store's rows are its word counts, ties in file-name order, recomputed from the files",
                 evidence=f"rows {[f'{c[9:25]} {s:g}' for c, s in shown_sdk]}; files' top {top_k} "
                          f"{[f'{c[9:25]} {s:g}' for c, s in sdk_scored[:top_k]]}",
                 holds=shown_sdk == [(c, float(s)) for c, s in sdk_scored[:top_k]])
    recounted = {"SDK file store": _rank([c for c, _ in sdk_scored], answer),
                 "FTS5 (BM25)": _rank([c for c, _ in sql], answer),
                 "vector (cosine)": _rank(best_first, answer)}
    table_ranks = {name: [r["rank"] for r in found if r["memory"] == answer] for name, found in rows.items()}
    ledger.check("S2", "the answer's rank in each search, as the table shows it, is the recomputed one",
                 evidence=[f"{name}: table {table_ranks[name]}, recomputed {recounted[name]}" for name in rows],
                 holds=all(table_ranks[name] == ([recounted[name]] if recounted[name] else []) for name in rows))

    # The numpy store behind an agent.
    classes = record["numpy_store"]["classes"]
    ledger.check("S1", "the numpy store subclasses nothing",
                 evidence=f"its classes: {classes}", holds=classes[1:] == ["object"])
    data_first = sorted(data_texts, key=everything.get, reverse=True)
    probe_saw = _seen(data_texts, record["numpy_store"]["received"])
    ledger.check("S1", "MemoryManager injected the numpy store's top 5 into the agent's call",
                 evidence=f"received {len(probe_saw)}: {sorted(round(everything[t], 3) for t in probe_saw)[::-1]}",
                 holds=set(probe_saw) == set(data_first[:INJECTED]))

    # Session 1: the memory the agent stored, from the session's files and SQL on the store's file.
    uses, sql_rows = record["monday"]["uses"], record["monday"]["rows"]
    contents = [c for _, c, _ in sql_rows]
    written = [(u, e) for u in uses for e in u["entries"]]
    ledger.check("S3", "session 1's agent stored a memory itself, with the add tool",
                 evidence=[f"files: {u['tool_use_id']} {u['status']}; a row in SQL: {e in contents}" for u, e in written],
                 holds=bool(written) and all(u["status"] == "success" and e in contents for u, e in written))
    if record["offline_rules"]:
        ledger.check("S3", "the memory it stored is the data file's sentence, word for word",
                     evidence=f"add_memory entries (files): {[e for _, e in written]}",
                     holds=answer in [e for _, e in written] and answer not in record["earlier"])
    else:
        ledger.skip("S3", "the memory it stored is the data file's sentence, word for word",
                    reason="a real model words the memory its own way")
    ledger.equal("S3", "one row per text in the SQLite file: the earlier memories and the agent's",
                 observed=sorted(contents), expected=sorted(stored), what="rows in memories (SQL)")
    ledger.equal("S3", "the memories persist in the file: a new store object on it finds them all",
                 observed=record["monday"]["reopened_count"], expected=len(stored), what="memories")

    # Session 2: the fresh agent, from its session files and what the model received.
    thursday = record["thursday"]
    ledger.check("C1 S4", "it is a new session: no earlier message, only its own turn stored",
                 evidence=f"message files of thursday-chat: {len(thursday['files'])}",
                 holds=len(thursday["files"]) == 2)
    five = best_first[:INJECTED]
    near = {t for t in five if abs(fresh[t] - min_score) < 1e-3}  # either side of the store's rounding
    expected = [t for t in five if fresh[t] >= min_score]
    seen = _seen(best_first, thursday["received"])
    ledger.check("S4", "the fresh agent received those of the top 5 memories that reach min_score",
                 evidence=f"received {len(seen)}: {[f'{fresh[t]:.3f}' for t in seen]}; min_score {min_score:g}",
                 holds=set(expected) - near <= set(seen) <= set(expected) | near)
    unlimited = _seen(best_first, thursday["unlimited"])
    ledger.check("S4", "with no threshold, the injection hands the model the top 5 memories, whatever top_k",
                 evidence=f"top_k {top_k}; received {len(unlimited)}: {[f'{fresh[t]:.3f}' for t in unlimited]}",
                 holds=unlimited == five)
    given = [t for t in expected if t not in near]
    reply = thursday["reply"].strip()
    if record["offline_rules"]:  # the offline model answers from the first memory it was given, or says it has none
        ledger.check("C1 S4", "the fresh agent answers from the memories it was given",
                     evidence=f"reply: {reply!r}; quotes the first given (numpy): "
                              + (f"{given[0] in reply}" if given else "none given"),
                     holds=given[0] in reply if given else not any(t in reply for t in stored))
    else:
        ledger.skip("C1 S4", "the fresh agent answers from the memories it was given",
                    reason="a real model's reply is its own wording")
    not_given = [t for t in stored if t not in expected and t not in near]
    leaked = [t for t in not_given if t in seen]
    ledger.check("C1 S4", "what it was not given, the model never saw",
                 evidence=f"given: {len(given)}; of the other {len(not_given)} memories, in any of the model's "
                          f"{len(thursday['received'])} inputs: {len(leaked)}",
                 holds=not leaked and len(not_given) + len(given) + len(near) == len(stored))
    plotted, names = record["bars"]["widths"], record["bars"]["names"]
    ledger.check("S4", "the bar chart plots every memory's cosine, sorted, each bar named by its memory",
                 evidence=f"{len(plotted)} bars; first {names[:1]} at {plotted[0]:.3f}" if plotted else "no bars",
                 holds=len(plotted) == len(stored)
                 and all(abs(w - fresh[t]) < 1e-3 for w, t in zip(plotted, best_first))
                 and all(n in t for n, t in zip(names, best_first)))
    files = "".join(thursday["files"])
    block = "<memory>" in "".join(thursday["received"])
    ledger.check("S5", "injection is per call: the call held the memory block, no session file does",
                 evidence=f"<memory> in the call: {block}; in the session files: {'<memory>' in files}; "
                          f"the question in them: {record['query'] in files}",
                 holds=block == bool(seen) and "<memory>" not in files and record["query"] in files)

    # The 44 pairs, ranked again.
    recall = record["recall"]
    by_numpy, by_sql = _scores(recall["vector_ranks"]), _scores(recall["keyword_ranks"])
    ledger.check("S6", "measured over 44 questions: vector search beats keyword search",
                 evidence=f"recomputed MRR: vector {by_numpy['mrr']} (numpy ranks, no threshold), keyword "
                          f"{by_sql['mrr']} (SQL on an FTS5 table of the facts)",
                 holds=by_numpy == recall["result"]["vector (cosine)"]
                 and by_sql == recall["result"]["keyword (FTS5 BM25)"] and by_numpy["mrr"] > by_sql["mrr"])
    shared = [(i, sorted(content_words(p["fact"]) & content_words(p["query"])))
              for i, p in enumerate(recall["pairs"])]
    shared = [(i, words) for i, words in shared if words]
    ledger.check("S6", "no question shares a content word with its fact",
                 evidence=f"{len(recall['pairs'])} pairs; sharing a content word: {shared}",
                 holds=bool(recall["pairs"]) and not shared)
    return ledger
