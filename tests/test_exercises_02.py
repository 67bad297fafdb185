"""Notebook 02's exercises, replayed: one run with every solution appended (each builds agents of its own and writes
only to folders of its own, so none changes what another or the notebook's checks read), then "Check yourself" run
again after them; and a refused session id on its own, which stops the notebook before its workspace is reset."""

from __future__ import annotations

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, run_once, solution_code

NAME = "02_agent_json_anatomy.ipynb"


@pytest.fixture(scope="module")
def exercises(tmp_path_factory):
    """(the executed notebook, its workspace root)."""
    notebook = nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4)
    solutions = solution_code(notebook)
    assert len(solutions) == 3, "the solutions of exercises 1 to 3"
    (check_cell,) = [c.source for c in notebook.cells if c.cell_type == "code" and ".report()" in c.source]
    return run_once(tmp_path_factory, NAME, {"workspace": "ex_02"}, [*solutions, check_cell])


@pytest.fixture(scope="module")
def exercises_run(exercises):
    return exercises[0]


def test_the_checks_hold_and_still_hold_after_the_exercises(exercises_run):
    assert checks_held(exercises_run), ledger_text(exercises_run)
    assert ledger_text(exercises_run).count("6 of 6 claims hold") == 2, ledger_text(exercises_run)


def test_exercise_1_the_model_answers_from_the_state_in_its_prompt(exercises_run):
    assert "Your plan is pro.\n" in printed(exercises_run).splitlines(keepends=True)


def test_exercise_2_a_datetime_is_refused_and_its_iso_text_stored(exercises_run):
    text = printed(exercises_run)
    assert "ValueError: Value is not JSON serializable: datetime" in text
    assert "\nstr\n" in text


def test_exercise_3_snapshot_writes_per_strategy(exercises_run):
    assert "invocation 2\nmessage 6\n" in printed(exercises_run)


def test_the_exercises_write_only_in_the_notebooks_workspace(exercises):
    _, root = exercises
    assert sorted(p.name for p in root.iterdir()) == ["ex_02"]


@pytest.mark.parametrize("parameter", ["session_id", "snapshot_session_id"])
def test_a_refused_session_id_stops_before_the_reset(tmp_path, workspace_root, parameter):
    kept = workspace_root / "ex_02_bad" / "keep.txt"
    kept.parent.mkdir()
    kept.write_text("from an earlier run")
    with pytest.raises(papermill.PapermillExecutionError, match="Unsafe session id"):
        notebook_runs.refuse(NAME, {"workspace": "ex_02_bad", parameter: ".."})
    assert kept.read_text() == "from an earlier run", "the workspace was not emptied"
    assert [p.name for p in kept.parent.iterdir()] == ["keep.txt"], "no session_.. directory was created"
