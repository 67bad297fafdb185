"""Notebook 06's ledger: keyword and embedding search on one paraphrase, a memory stored by one agent and recalled by a
fresh one, and recall over the evaluation pairs, each checked by a second method.

The evidence never comes from the lesson's tables: cosines are recomputed with numpy from fresh embeddings of the
store's texts (found a second way: the data file and the agent's `add_memory` calls in the session files), keyword
rankings with SQL on the store's FTS5 index and from the SDK file store's markdown files, what each model call received
from a `MeteredModel`'s exchanges, the stored rows with SQL on a connection of their own, and the sessions from their
message files. The 44 questions are ranked again with one numpy matrix product and with an FTS5 table of their own.
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
    "S3": "the agent stores a memory with add_memory: one row per text, with the messages it came from",
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


def _sdk_ranking(question: str, notes: dict[str, str]) -> list[str]:
    """The SDK file store's rule, recomputed: the question's words minus stop words found in a file's name and text,
    counted; ties in file-name order; files with no such word left out."""
    kept = tokenize(question) - STOP_WORDS
    scores = {stem: len(kept & tokenize(f"{stem} {text}")) for stem, text in notes.items()}
    return [notes[s].strip() for s in sorted(scores, key=lambda s: (-scores[s], s)) if scores[s]]


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
           store: Any, hits: dict[str, list], bars: Any, pairs: list[dict[str, str]], result: dict[str, Any],
           workspace_dir: Path) -> dict[str, Any]:
    """The evidence of notebook 06's run. `agents` maps "probe" (on the numpy `store`), "writer" (session 1) and
    "reader" (session 2) to their agents; `hits` are the three searches the lesson showed, `bars` its bar chart and
    `result` its evaluation of `pairs`."""
    workspace_dir = Path(workspace_dir)
    sessions, path = workspace_dir / "sessions", workspace_dir / "memory.db"
    monday = _messages(sessions, "monday-chat")
    uses = _tool_uses(monday)
    texts = list(dict.fromkeys([*memories.memories, *(e for u in uses for e in u["entries"])]))
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
        "texts": texts,
        "cosines": {"query": cosines(query), "data_query": cosines(memories.query)},
        "fts": {name: [[c, s] for c, s in found] for name, found in fts.items()},
        "notes": notes,
        "shown": {"sdk": [e.content for e in hits["sdk"]], "fts": [[h.content, h.score] for h in hits["fts"]],
                  "vector": [[h.content, h.score] for h in hits["vector"]]},
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
    answer, data_texts, texts = record["answer"], record["data_texts"], record["texts"]
    top_k, min_score = record["top_k"], record["min_score"]

    # The claim, on the data file's own paraphrase, so it holds whatever `query` the learner sets.
    own = {t: s for t, s in record["cosines"]["data_query"].items() if t in data_texts}
    first = max(own, key=own.get)
    ledger.check("C1 S2", "an embedding search ranks the paraphrase's answer first",
                 evidence=f"numpy cosine of {record['data_query']!r}: best {own[first]:.3f} {first!r}",
                 holds=first == answer)
    fts_order = [c for c, _ in record["fts"]["data_query"] if c in data_texts]
    ledger.check("C1 S2", "FTS5 ranks it below an irrelevant memory",
                 evidence=f"SQL bm25 order: the answer ranks "
                          f"{fts_order.index(answer) + 1 if answer in fts_order else None}; first: {fts_order[:1]}",
                 holds=bool(fts_order) and fts_order[0] != answer)
    sdk_order = _sdk_ranking(record["data_query"], record["notes"])
    ledger.check("C1 S2", "the SDK's keyword search ranks it below an irrelevant memory",
                 evidence=f"recomputed from the markdown files: the answer ranks "
                          f"{sdk_order.index(answer) + 1 if answer in sdk_order else None}; first: {sdk_order[:1]}",
                 holds=bool(sdk_order) and sdk_order[0] != answer)

    # The three searches the lesson showed, for `query`.
    fresh = record["cosines"]["query"]
    best_first = sorted(fresh, key=fresh.get, reverse=True)
    shown = record["shown"]
    ledger.check("S2", "the vector hits are the top_k memories by numpy cosine, with their scores",
                 evidence=[f"{s:.4f} vs {fresh.get(c, float('nan')):.4f}" for c, s in shown["vector"]],
                 holds=[c for c, _ in shown["vector"]] == best_first[:top_k]
                 and all(abs(s - fresh[c]) < 1e-3 for c, s in shown["vector"]))
    sql = record["fts"]["query"][:top_k]
    ledger.check("S2", "the FTS5 hits and scores are SQL's bm25 of the ORed query",
                 evidence=[f"{s:.4f}" for _, s in sql],
                 holds=[c for c, _ in shown["fts"]] == [c for c, _ in sql]
                 and all(abs(a - b) < 1e-3 for (_, a), (_, b) in zip(shown["fts"], sql)))
    sdk_query = _sdk_ranking(record["query"], record["notes"])
    ledger.check("S2", "the SDK file store's hits are the ranking recomputed from the files",
                 evidence=f"hits {[c[9:25] for c in shown['sdk']]}; files' top {top_k} "
                          f"{[c[9:25] for c in sdk_query[:top_k]]}",
                 holds=shown["sdk"] == sdk_query[:top_k])

    # The numpy store behind an agent.
    classes = record["numpy_store"]["classes"]
    ledger.check("S1", "the numpy store subclasses nothing",
                 evidence=f"its classes: {classes}", holds=classes[1:] == ["object"])
    data_first = sorted((t for t in best_first if t in data_texts), key=fresh.get, reverse=True)
    probe_saw = _seen(data_texts, record["numpy_store"]["received"])
    ledger.check("S1", "MemoryManager injected the numpy store's top 5 into the agent's call",
                 evidence=f"received {len(probe_saw)}: {sorted(round(fresh[t], 3) for t in probe_saw)[::-1]}",
                 holds=set(probe_saw) == set(data_first[:INJECTED]))

    # Session 1: the memory the agent stored, from the session's files and SQL on the store's file.
    uses, rows = record["monday"]["uses"], record["monday"]["rows"]
    by_text = {content: (rowid, meta) for rowid, content, meta in rows}
    stored = [(u, e) for u in uses for e in u["entries"]]
    ledger.check("S3", "session 1's agent stored a memory itself, with the add tool",
                 evidence=[f"files: {u['tool_use_id']} {u['status']}; its row's lineage names "
                           f"{by_text.get(e, (None, {}))[1].get('lineage', {}).get('tool_use_id')}"
                           for u, e in stored],
                 holds=bool(stored) and all(
                     u["status"] == "success"
                     and by_text.get(e, (None, {}))[1].get("lineage", {}).get("tool_use_id") == u["tool_use_id"]
                     for u, e in stored))
    if record["offline_rules"]:
        ledger.check("S3", "the memory it stored is the data file's sentence, word for word",
                     evidence=f"add_memory entries (files): {[e for _, e in stored]}",
                     holds=answer in [e for _, e in stored] and answer not in record["earlier"])
    else:
        ledger.skip("S3", "the memory it stored is the data file's sentence, word for word",
                    reason="a real model words the memory its own way")
    ledger.equal("S3", "one row per text in the SQLite file", observed=sorted(c for _, c, _ in rows),
                 expected=sorted(texts), what="rows in memories (SQL)")
    ledger.equal("S3", "the memories persist in the file: a new store object on it finds them all",
                 observed=record["monday"]["reopened_count"], expected=len(texts), what="memories")
    lineage = {e: by_text.get(e, (None, {}))[1].get("lineage") or {} for _, e in stored}
    ledger.check("S3", "the memory the agent stored records its turn, as the session's message files have it",
                 evidence=[f"files: messages {u['messages']}; row: {lineage[e].get('derived')} "
                           f"{lineage[e].get('session_id')} {lineage[e].get('messages')}" for u, e in stored],
                 holds=bool(stored) and all(
                     lineage[e].get("derived") == "tool call" and lineage[e].get("session_id") == "monday-chat"
                     and lineage[e].get("messages") == u["messages"]
                     and lineage[e].get("message_ids") == u["message_ids"] for u, e in stored))
    with_lineage = sorted(c for _, c, meta in rows if "lineage" in meta)
    ledger.check("S3", f"only the agent's memories record a lineage, none of the {len(record['earlier'])} from data/",
                 evidence=f"rows with a lineage (SQL): {with_lineage}",
                 holds=with_lineage == sorted({e for _, e in stored})
                 and not set(with_lineage) & set(record["earlier"]))

    # Session 2: the fresh agent, from its session files and what the model received.
    thursday = record["thursday"]
    ledger.check("C1 S4", "it is a new session: no earlier message, only its own turn stored",
                 evidence=f"message files of thursday-chat: {len(thursday['files'])}",
                 holds=len(thursday["files"]) == 2)
    top = best_first[:INJECTED]
    near = {t for t in top if abs(fresh[t] - min_score) < 1e-3}  # either side of the store's rounding
    expected = [t for t in top if fresh[t] >= min_score]
    seen = _seen(best_first, thursday["received"])
    ledger.check("S4", "the fresh agent received those of the top 5 memories that reach min_score",
                 evidence=f"received {len(seen)}: {[f'{fresh[t]:.3f}' for t in seen]}; min_score {min_score:g}",
                 holds=set(expected) - near <= set(seen) <= set(expected) | near)
    unlimited = _seen(best_first, thursday["unlimited"])
    ledger.check("S4", "with no threshold, the injection hands the model the top 5 memories, whatever top_k",
                 evidence=f"top_k {top_k}; received {len(unlimited)}: {[f'{fresh[t]:.3f}' for t in unlimited]}",
                 holds=unlimited == top)
    given = [t for t in expected if t not in near]
    reply = thursday["reply"].strip()
    if record["offline_rules"]:  # the offline model answers from the first memory it was given, or says it has none
        ledger.check("C1 S4", "the fresh agent answers from the memories it was given",
                     evidence=f"reply: {reply!r}; quotes the first given (numpy): "
                              + (f"{given[0] in reply}" if given else "none given"),
                     holds=given[0] in reply if given else not any(t in reply for t in texts))
    else:
        ledger.skip("C1 S4", "the fresh agent answers from the memories it was given",
                    reason="a real model's reply is its own wording")
    not_given = [t for t in texts if t not in expected and t not in near]
    leaked = [t for t in not_given if t in seen]
    ledger.check("C1 S4", "what it was not given, the model never saw",
                 evidence=f"given: {len(given)}; of the other {len(not_given)} memories, in any of the model's "
                          f"{len(thursday['received'])} inputs: {len(leaked)}",
                 holds=not leaked and len(not_given) + len(given) + len(near) == len(texts))
    plotted, names = record["bars"]["widths"], record["bars"]["names"]
    ledger.check("S4", "the bar chart plots every memory's cosine, sorted, each bar named by its memory",
                 evidence=f"{len(plotted)} bars; first {names[:1]} at {plotted[0]:.3f}" if plotted else "no bars",
                 holds=len(plotted) == len(texts)
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
