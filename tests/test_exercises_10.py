"""Notebook 10's exercises, replayed: one run with the solutions of 1-3 appended (1 reads a recipe's copy, 2 runs
forget() on a copy of the backup while another process holds the write lock, 3 shreds the other user after the checks
have read the shredded files), exercise 4's parameters in the class replay (classes/sample.yaml gives them: they
change the value the solutions' counts are of, so they cannot join the run above), and the refusals, which stop at the
setup cell."""

from __future__ import annotations

import re

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, replayed, run_once, solution_code

NAME = "10_what_a_delete_leaves_behind.ipynb"


def shown(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    solutions = solution_code(nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 3, "the solutions of exercises 1-3"
    notebook, _ = run_once(tmp_path_factory, NAME, {}, solutions)
    return notebook


def test_the_notebook_holds_with_the_solutions_appended(exercises_run):
    assert checks_held(exercises_run), ledger_text(exercises_run)
    assert not any(o.get("output_type") == "error" for c in exercises_run.cells for o in c.get("outputs", []))


def test_exercise_1_a_merge_alone_leaves_the_pages_text(exercises_run):
    assert "the value's bytes after DELETE + merge: 3" in shown(exercises_run.cells[-3])


def test_exercise_2_a_forget_waits_for_other_writers(exercises_run):
    refused, scanned = shown(exercises_run.cells[-2]).splitlines()
    assert refused.startswith("StoreUnavailableError: The vector store locked/memory.db is locked by another "
                              "process, holding a write lock"), refused
    assert refused.endswith("Nothing was changed in any store: let that writer finish (close its store or stop its "
                            "process), then run forget() again."), refused
    assert scanned == "places the scan finds in locked/: 11", "the locked copy holds all it held, as the backup"
    (restore,) = [shown(c) for c in exercises_run.cells if "each logged request, replayed" in c.source]
    assert "after the restore: 11 places" in restore, "the same count as the restored backup"


def test_exercise_3_a_shredded_user_stays_shredded(exercises_run):
    refused = shown(exercises_run.cells[-1]).splitlines()
    assert refused == ["refused: No key for user 'grace'",
                       "refused: Cannot add to user 'grace''s memory: this user was shredded (their key was "
                       "destroyed)"], refused


def test_exercise_4_another_fact(series_replay):
    """The class replay's run of 10 (paraphrase voice, local Bedrock path): the value's places in the stores and the
    recipes that leave none are the files', not the model's words. That it wrote only inside its own workspace is
    tests/test_replay.py's check of every notebook of the replay (each workspace folder is one notebook's)."""
    executed, workspace = replayed(series_replay, NAME, {"fact_key": "phone number", "value": "555-0142",
                                                         "other_value": "555-0199"})
    ledger = ledger_text(executed)
    assert checks_held(executed), ledger
    assert "ada's phone number '555-0142' is in the five stores of stores/" in printed(executed)
    text = printed(executed, plain=True)
    (recipes,) = [shown(c) for c in executed.cells if "itertools.product" in c.source]
    clean = [line.split("  ")[0] for line in recipes.splitlines() if re.search(r"\s0\s+0\s+nothing\s*$", line)]
    assert clean == ["DELETE + merge + VACUUM", "DELETE + secure_delete + merge",
                     "DELETE + secure_delete + merge + VACUUM"], recipes
    assert "index term '0142'" in text
    assert (workspace / "record.json").is_file(), "its record is in its own workspace"


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"user": "ada", "other_user": "ada"}, "user and other_user must differ"),
        ({"embedder": "bert"}, "Unknown embedder 'bert'"),
        ({"backend": "nova"}, "Unknown model backend 'nova'"),
    ],
    ids=["same-user", "unknown-embedder", "unknown-backend"],
)
def test_bad_parameters_stop_before_anything_is_written(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        notebook_runs.refuse(NAME, {"workspace": "ex_10c", **parameters})
    assert not (workspace_root / "ex_10c").exists(), "refused before the workspace was reset"
