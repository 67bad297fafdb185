"""Notebook 06's exercises, replayed: one run with exercise 2's parameter and the solutions of 3 and 4 appended (they
write only their own file and draw a figure; which fact each pet question finds first, and the notebook's checks, run
again after them), exercise 1 in the class replay (classes/sample.yaml gives its query: it changes what exercise 4
draws, so it cannot join the run above), and the refusals of bad parameters on their own."""

from __future__ import annotations

import re

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, replayed, run_once, solution_code

NAME = "06_vector_recall.ipynb"
CLUSTER = "The user's production cluster is called atlas-prod in eu-west-1."

# After the solutions: what the store's own search (the one a search tool would call) returns at min_score 0.6.
STORE_SEARCH = 'print("STORE SEARCH", len(await vector_store.search(query, {"max_search_results": 12})))'
# After exercise 3's solution: which fact each pet question finds first among the 47.
PET_FIRSTS = """
pet_store = NumpyMemoryStore(vectors)
for pair in all_pairs:
    await pet_store.add(pair["fact"])
for question in ("Do they own any pets?", "What name does their pet answer to?"):
    print("FIRST FOR", question, (await pet_store.search(question, {"max_search_results": 1}))[0].content)
"""


def check_cell() -> str:
    """The code cell of "Check yourself", to run again after the exercises."""
    cells = nbformat.read(NOTEBOOKS / NAME, as_version=4).cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    return next(c.source for c in cells[start:] if c.cell_type == "code")


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    solutions = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 2, "the solutions of exercises 3 and 4"
    notebook, root = run_once(tmp_path_factory, NAME, {"min_score": 0.6},
                              [*solutions, STORE_SEARCH, PET_FIRSTS, check_cell()])
    return notebook, root


def test_exercise_2_threshold_above_every_score(exercises_run):
    notebook, _ = exercises_run
    text = printed(notebook)
    assert "memories in the call: 0" in text
    assert "agent: I cannot see anything about that in this conversation." in text
    assert "0.494  The user prefers deployments to happen on Tuesday mornings." in text, "the best score, below 0.6"
    assert "0 of the 12 score at least min_score 0.6" in printed(notebook, plain=True), "the line right of every bar"
    assert "STORE SEARCH 0" in text, "the store applies the threshold: a search tool would find nothing either"


def test_the_checks_hold_again_after_the_exercises(exercises_run):
    notebook, _ = exercises_run
    assert checks_held(notebook), ledger_text(notebook)
    assert len(re.findall(r"Check yourself: 7 of 7 claims hold", ledger_text(notebook))) == 2


def test_exercise_3_your_own_pairs(exercises_run):
    notebook, root = exercises_run
    text = printed(notebook)
    assert "44 questions over 44 memories" in text and "vector (cosine)" in printed(notebook, plain=True)
    assert re.search(r"vector \(cosine\)\s+0\.8864", printed(notebook, plain=True)), "recall@1 before the new pairs"
    assert "recall@1 over 47 pairs: 0.8298" in text, "from 0.8864"
    assert "('Do they own any pets?', 2)" in text, "the new dog comes before the cats"
    assert "FIRST FOR Do they own any pets? The user's dog is called Pixel." in text
    assert "('What name does their pet answer to?', 2)" in text, "the new pet question finds the cats first"
    assert "FIRST FOR What name does their pet answer to? The user has two cats named Miso and Tofu." in text
    assert (root / "06_vector_recall" / "my_pairs.jsonl").is_file(), "written in the notebook's workspace"


def test_exercise_4_the_map(exercises_run):
    notebook, _ = exercises_run
    assert "the axes keep 29% of the variance; the answer is number 4 nearest the star" in printed(notebook)
    assert "0.494  The user prefers deployments" in printed(notebook), "first by cosine"


def test_exercise_1_another_paraphrase(series_replay):
    """The class replay's run of 06 (paraphrase voice, local Bedrock path): what it asserts are search results and
    scores, which the model's words do not change."""
    notebook, _ = replayed(series_replay, NAME, {"query": "Which day suits them for pushing to production?"})
    assert checks_held(notebook), ledger_text(notebook)
    plain = printed(notebook, plain=True)
    assert re.search(rf"SDK file store\s+1\s+1\.0000\s+production\s+{re.escape(CLUSTER)}", plain)
    assert re.search(rf"FTS5 \(BM25\)\s+1\s+\S+\s+production \S+\s+{re.escape(CLUSTER)}", plain)
    assert "0.528  The user prefers deployments to happen on Tuesday mornings." in printed(notebook)


def test_an_empty_query_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    message = ("query must be a non-empty text (the question every search here asks); got ''. "
               "Change it in the parameters cell (or papermill -p).")
    (workspace_root / "ex_06c").mkdir()
    (workspace_root / "ex_06c" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match=re.escape(message)):
        notebook_runs.refuse(NAME, {"workspace": "ex_06c", "query": ""})
    assert (workspace_root / "ex_06c" / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize("parameters, message", [
    ({"top_k": 0}, "top_k must be a whole number from 1 to 12"),
    ({"min_score": 1.5}, "min_score must be a number in"),
    ({"embedder": "word2vec"}, "embedder must be one of"),
])
def test_invalid_parameters_are_refused_up_front(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        notebook_runs.refuse(NAME, {"workspace": "ex_06d", **parameters})
    assert not (workspace_root / "ex_06d").exists(), "stopped before the workspace was reset"
