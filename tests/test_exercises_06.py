"""Notebook 06's exercises replayed: each parameter exercise with papermill (its ledger must hold and it must show
what the exercise says), each code exercise's hidden solution run in new cells after "Check yourself" (the checks run
again after them and still hold), with the difference from the baseline that the exercise promises."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, solution_code

NAME = "06_vector_recall.ipynb"
DEPLOY = "The user prefers deployments to happen on Tuesday mornings."
MEETINGS = "The user dislikes meetings before 10am."
ON_CALL = "The user is on call every third week."


def replay(tmp_path: Path, parameters: dict, extra_cells=()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells)


def cells() -> list:
    return nbformat.read(NOTEBOOKS / NAME, as_version=4).cells


def check_cells() -> list[str]:
    """The code cells of "Check yourself", to run again after the exercises."""
    all_cells = cells()
    start = next(i for i, c in enumerate(all_cells) if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    end = next(i for i in range(start + 1, len(all_cells)) if all_cells[i].cell_type == "markdown")
    return [c.source for c in all_cells[start + 1 : end]]


def test_exercise_1_another_paraphrase(tmp_path, workspace_root):
    notebook = replay(tmp_path, {"workspace": "ex_06a", "query": "Which day suits them for pushing to production?"})
    text = printed(notebook)
    assert checks_held(notebook), ledger_text(notebook)
    assert "the answer ranks 1 of 12 at cosine 0.528" in text, "the solution's cosine and rank"
    assert "Top hit 'The user's production cluster is called atlas-prod in eu-west-1.'" in text, "FTS5 lifts the cluster"
    assert "'production'" in text


# After exercise 2's run: what the store's own search (the one a search tool would call) returns for the query.
STORE_SEARCH = 'print("STORE SEARCH", len(await vector_store.search(query, {"max_search_results": 12})))'


def test_exercise_2_threshold_above_every_score(tmp_path, workspace_root):
    notebook = replay(tmp_path, {"workspace": "ex_06b", "min_score": 0.6}, [STORE_SEARCH])
    text = printed(notebook)
    assert checks_held(notebook), ledger_text(notebook)
    assert "injected: 0 memories (none reached min_score)" in text
    assert "agent: I cannot see anything about that in this conversation." in text
    assert "the answer ranks 1 of 12 at cosine 0.494" in text, "the best score, below 0.6"
    assert "0 of the 12 score at least min_score 0.6" in printed(notebook, plain=True), "the line right of every bar"
    assert "STORE SEARCH 0" in text, "a search tool would find nothing either: the store applies the threshold"


def test_exercise_3_empty_query_is_refused(tmp_path, workspace_root):
    message = ("query must be a non-empty text (the question every search in this notebook asks); got ''. "
               "Change it in the parameters cell (or papermill -p).")
    with pytest.raises(papermill.PapermillExecutionError, match=re.escape(message)):
        replay(tmp_path, {"workspace": "ex_06c", "query": ""})
    assert not (workspace_root / "ex_06c").exists(), "stopped before the workspace was reset"


@pytest.mark.parametrize("parameters, message", [
    ({"top_k": 0}, "top_k must be a whole number from 1 to 12"),
    ({"min_score": 1.5}, "min_score must be a number in"),
    ({"embedder": "word2vec"}, "embedder must be one of"),
])
def test_invalid_parameters_are_refused_up_front(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        replay(tmp_path, {"workspace": "ex_06d", **parameters})


# ---------------------------------------------------------------- code exercises: the hidden solutions, executed

# After the solutions: a store whose exact cosine for one memory rounds UP to its 4-decimal score, with min_score set
# to that rounded score: filtering on the exact cosine drops the memory, filtering on the rounded score would keep it.
ROUNDING_PROBE = """
exact = dict(zip(strict.texts, (strict.matrix @ vectors.embed([miss_query])[0]).tolist()))
rounded_up = next(t for t, s in exact.items() if round(s, 4) > s)
at_rounded = await open_store(ThresholdNumpyStore(vectors, min_score=round(exact[rounded_up], 4)))
probe_hits = [e.content for e in await at_rounded.search(miss_query, {"max_search_results": 12})]
print("PROBE", json.dumps({"memory": rounded_up, "kept": rounded_up in probe_hits,
                           "exact": exact[rounded_up], "threshold": round(exact[rounded_up], 4)}))
print("SCORED", json.dumps({"memories": scored["memories"], "ranks": scored["ranks"]}))
print("STRICT", json.dumps({q: injected_into_call(strict, q) for q in (query, miss_query)}))
print("PLAIN", json.dumps({q: injected_into_call(plain_numpy, q) for q in (query, miss_query)}))
"""


def emitted(notebook, label):
    (line,) = [line for line in printed(notebook).splitlines() if line.startswith(label + " ")]
    return json.loads(line[len(label) + 1 :])


def test_code_exercises_4_and_5(tmp_path, workspace_root):
    pairs, threshold = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    notebook = replay(tmp_path, {"workspace": "ex_06_code"}, [pairs, threshold, ROUNDING_PROBE, *check_cells()])
    text = printed(notebook)
    assert checks_held(notebook), ledger_text(notebook)
    assert ledger_text(notebook).count("27 of 27 claims hold") == 2, "the ledger holds again after the exercises"

    # 4: 47 pairs scored through the protocol, next to the 44's baseline; the copy lives in the workspace
    scored = emitted(notebook, "SCORED")
    assert scored["memories"] == 47 and len(scored["ranks"]) == 47
    assert all(rank is not None for rank in scored["ranks"]), "every fact comes back (all memories are returned)"
    assert "recall@1 over 47 pairs: " in text and "(the 44: 0.8864)" in text, "next to the baseline"
    assert "yours not at rank 1: [" in text
    assert (workspace_root / "ex_06_code" / "my_pairs.jsonl").is_file()

    # 5: what the model received, with and without the threshold, and the boundary of the miss query
    strict, plain = emitted(notebook, "STRICT"), emitted(notebook, "PLAIN")
    query, miss_query = list(strict)
    assert strict[query] == [DEPLOY], "at min_score 0.3 only the deployment memory (0.4939) reaches the model"
    assert strict[miss_query] == [ON_CALL, DEPLOY], "0.5608 and 0.3105 kept; 0.2993 (meetings) dropped"
    assert MEETINGS in plain[miss_query] and len(plain[query]) == len(plain[miss_query]) == 5, "the baseline: 5 each"
    assert "no threshold : 5 received" in text
    assert "min_score=0.3: 1 received: 0.4939" in text
    assert "min_score=0.3: 2 received: 0.5608, 0.3105" in text
    assert f"the best score dropped: 0.2993 {MEETINGS!r}" in text
    probe = emitted(notebook, "PROBE")
    assert probe["exact"] < probe["threshold"] and not probe["kept"], f"filtered on the rounded score: {probe}"


def test_numpy_store_cell_is_about_thirty_lines():
    source = next(c.source for c in cells() if c.id == "c06-numpy-store")
    assert len(source.splitlines()) <= 32
