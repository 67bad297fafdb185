"""Notebook 06's checks (companion/checks/vector_recall.py), each shown failing on a broken copy of the recorded run."""

from __future__ import annotations

import json

from checks_harness import check_suite

from companion.checks import vector_recall

ANSWER = "The user prefers deployments to happen on Tuesday mornings."
PEANUTS = "The user is allergic to peanuts."
CATS = "The user has two cats named Miso and Tofu."
ON_CALL = "The user is on call every third week."  # the 5th by cosine for the lesson's question


def rows_of(record, search):
    """The rows the lesson's table showed for one search, in order."""
    return [row for row in record["shown"] if row["search"] == search]


def swap_memories(rows):
    """Two of a search's rows trade places: a table in another order than the search's."""
    rows[0]["memory"], rows[1]["memory"] = rows[1]["memory"], rows[0]["memory"]


def use(record):
    return record["monday"]["uses"][0]


def row_of(record, text):
    return next(row for row in record["monday"]["rows"] if row[1] == text)


def edit_calls(calls, old, new):
    return [text.replace(old, new) for text in calls]


def answer_first_in_files(record):
    """A file store whose answer's file sorts first: the tie on *user* is then settled in its favour."""
    notes = record["notes"]
    stem = next(s for s, text in notes.items() if text.strip() == ANSWER)
    notes["a-" + stem] = notes.pop(stem)


def leak(record):
    """A memory the store did not return reaches the model anyway (say, through the system prompt)."""
    record["thursday"]["received"][0] += json.dumps(CATS)


BREAKAGES = {
    # an embedder for which another memory sits nearer the paraphrase
    "an embedding search ranks the paraphrase's answer first":
        lambda r: r["cosines"]["data_query"].update({PEANUTS: 0.9}),
    # a keyword index that ranked the answer first
    "FTS5 ranks it below an irrelevant memory":
        lambda r: r["fts"]["data_query"].sort(key=lambda row: row[0] != ANSWER),
    "the SDK's keyword search ranks it below an irrelevant memory": answer_first_in_files,
    # a table that shows a score the vectors do not give
    "the vector rows are the top_k memories by numpy cosine, with their scores":
        lambda r: rows_of(r, "vector (cosine)")[0].update(score=rows_of(r, "vector (cosine)")[0]["score"] + 0.1),
    "the FTS5 rows and scores are SQL's bm25 of the ORed query":
        lambda r: swap_memories(rows_of(r, "FTS5 (BM25)")),
    # ties settled some other way than by file name
    "the SDK file store's rows are its word counts, ties in file-name order, recomputed from the files":
        lambda r: swap_memories(rows_of(r, "SDK file store")),
    # a table that puts the answer where the search did not
    "the answer's rank in each search, as the table shows it, is the recomputed one":
        lambda r: rows_of(r, "SDK file store")[-1].update(rank=4),
    # a store built on the SDK's base class would not show that the manager goes by shape
    "the numpy store subclasses nothing":
        lambda r: r["numpy_store"]["classes"].insert(1, "MemoryStore"),
    # a manager that skipped the store's best match
    "MemoryManager injected the numpy store's top 5 into the agent's call":
        lambda r: r["numpy_store"].update(received=edit_calls(r["numpy_store"]["received"], ANSWER, "")),
    # the add tool failed
    "session 1's agent stored a memory itself, with the add tool":
        lambda r: use(r).update(status="error"),
    # a model that reworded the memory
    "the memory it stored is the data file's sentence, word for word":
        lambda r: use(r).update(entries=["Deploys: Tuesday mornings."]),
    # a store that kept the same text twice
    "one row per text in the SQLite file: the earlier memories and the agent's":
        lambda r: r["monday"]["rows"].append([str(len(r["monday"]["rows"]) + 1), *row_of(r, ANSWER)[1:]]),
    # a store that lived only in memory
    "the memories persist in the file: a new store object on it finds them all":
        lambda r: r["monday"].update(reopened_count=0),
    # the fresh agent restored the Monday chat
    "it is a new session: no earlier message, only its own turn stored":
        lambda r: r["thursday"]["files"].extend(r["thursday"]["files"][:2]),
    # a threshold applied twice: the answer never reached the call
    "the fresh agent received those of the top 5 memories that reach min_score":
        lambda r: r["thursday"].update(received=edit_calls(r["thursday"]["received"], ANSWER, "")),
    # an injection capped at top_k
    "with no threshold, the injection hands the model the top 5 memories, whatever top_k":
        lambda r: r["thursday"].update(unlimited=edit_calls(r["thursday"]["unlimited"], ON_CALL, "")),
    # a reply without the answer
    "the fresh agent answers from the memories it was given":
        lambda r: r["thursday"].update(reply="I cannot see anything about that in this conversation."),
    "what it was not given, the model never saw": leak,
    # a chart sorted the wrong way
    "the bar chart plots every memory's cosine, sorted, each bar named by its memory":
        lambda r: r["bars"]["widths"].reverse(),
    # a session manager that saved the injected block with the message
    "injection is per call: the call held the memory block, no session file does":
        lambda r: r["thursday"]["files"].__setitem__(0, r["thursday"]["files"][0] + "<memory>"),
    # a table that does not match the recount
    "measured over 44 questions: vector search beats keyword search":
        lambda r: r["recall"]["vector_ranks"].__setitem__(0, 2),
    # a question that repeats its fact's word, so a keyword search could find it
    "no question shares a content word with its fact":
        lambda r: r["recall"]["pairs"][0].update(query=r["recall"]["pairs"][0]["query"] + " Deployments?"),
}

VARIANTS = {
    # a real model: the checks of the offline model's wording are skipped, the others hold
    "a real model": lambda r: r.update(offline_rules=False),
}

globals().update(check_suite(vector_recall, "06_vector_recall", BREAKAGES, VARIANTS))
