"""Notebook 09's exercises, replayed: one run with the solutions of 1-3 appended (each plants in a folder of its own
and reads nothing the notebook's checks read), exercise 4's parameters in the class replay (classes/sample.yaml gives
them: they change the fact every solution plants and looks for, so they cannot join the run above), and the
refusals."""

from __future__ import annotations

import re

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, replayed, run_once, solution_code

NAME = "09_forgetting_on_purpose.ipynb"
STORES = ("session messages", "summary", "agent.state", "vector store", "markdown")


def shown(cell: nbformat.NotebookNode) -> str:
    """What a cell showed: its printed text and the text form of its tables."""
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    solutions = solution_code(nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 3, "the solutions of exercises 1, 2 and 3"
    notebook, root = run_once(tmp_path_factory, NAME, {}, solutions)
    return notebook, root


def test_the_notebook_holds_with_the_solutions_appended(exercises_run):
    notebook, root = exercises_run
    assert checks_held(notebook), ledger_text(notebook)
    assert not any(o.get("output_type") == "error" for c in notebook.cells for o in c.get("outputs", []))
    workspace = root / "09_forgetting_on_purpose"
    assert {p.name for p in workspace.iterdir() if p.is_dir()} >= {"stores", "before", "exercise-1", "exercise-2",
                                                                   "exercise-3"}


def test_exercise_1_a_forget_that_misses_the_summary(exercises_run):
    missed = shown(exercises_run[0].cells[-3])
    assert "places left: 1" in missed
    assert missed.count("agent.json") == 1
    assert re.search(r"^1\s+summary\s+agent\.json\s+1\s+the text\s*$", missed, re.MULTILINE), missed


def test_exercise_2_a_forget_without_the_user_scope(exercises_run):
    table = shown(exercises_run[0].cells[-2])
    for store in STORES:
        row = re.search(rf"^{re.escape(store)}\s+(\d+)\s+(\d+)\s*$", table, re.MULTILINE)
        assert row and int(row.group(2)) < int(row.group(1)), (store, table)
    for store in ("vector store", "markdown", "agent.state"):
        assert re.search(rf"^{store}\s+4\s+3\s*$", table, re.MULTILINE), (store, table)


def test_exercise_3_a_forget_by_text_leaves_the_reworded_note(exercises_run):
    by_text = shown(exercises_run[0].cells[-1])
    assert "byte scan: 0 places" in by_text
    assert "home address: Harbour Lane, no. 12" in by_text
    assert re.search(r"^1\s", by_text, re.MULTILINE) and not re.search(r"^2\s", by_text, re.MULTILINE), by_text


def test_exercise_4_another_fact_and_other_users(series_replay):
    """The class replay's run of 09 (paraphrase voice, local Bedrock path): the names, places and stores asserted are
    the parameters' and the stores', not the model's words. That it wrote only inside its own workspace is
    tests/test_replay.py's check of every notebook of the replay (each workspace folder is one notebook's)."""
    parameters = {"fact_key": "phone number", "value": "555-0142", "other_value": "555-0199", "user": "lin",
                  "other_user": "sam"}
    executed, workspace = replayed(series_replay, NAME, parameters)
    text = printed(executed, plain=True)
    assert "lin forgets the phone number '555-0142'; sam's is '555-0199'" in text
    assert "byte scan: 0 places; paraphrase check: 0 places" in text
    ledger = ledger_text(executed)
    assert checks_held(executed), ledger
    assert "stores whose files or rows held its bytes: agent.state, markdown, session messages, summary, vector " \
           "store: 5" in " ".join(ledger.split())
    assert (workspace / "record.json").is_file(), "its record is in its own workspace"


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"user": "ada", "other_user": "ada"}, "user and other_user must differ"),
        ({"value": "Vim"}, "'Vim' must not occur in '7 Quay Street'"),
        ({"value": "Quayside"}, "value must have two words or more .* got 'Quayside'"),
        ({"embedder": "bert"}, "Unknown embedder 'bert'"),
        ({"backend": "nova"}, "Unknown model backend 'nova'"),
    ],
    ids=["same-user", "value-in-the-conversation", "one-word-value", "unknown-embedder", "unknown-backend"],
)
def test_bad_parameters_stop_before_anything_is_written(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        notebook_runs.refuse(NAME, {"workspace": "ex_09c", **parameters})
    assert not (workspace_root / "ex_09c").exists(), "refused before the workspace was reset"


def test_every_code_cell_of_the_committed_notebook_ran():
    """nbval compares no output of a cell whose committed execution count is None: a cell edited after the refresh
    would pass with no output at all (the turn table once did)."""
    notebook = nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4)
    unrun = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and c.execution_count is None]
    assert unrun == [], f"code cells with no committed run: {unrun}; run tools/refresh_notebooks.py on {NAME}"
