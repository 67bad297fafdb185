"""Notebook 14's exercises, replayed: one run with both solutions appended (each works on a store of its own, after
the checks have read the lesson's files), and the refusal of one person as both owner and other participant, which
stops at the setup cell."""

from __future__ import annotations

import nbformat
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, refuse, run_once, solution_code

NAME = "14_procedures.ipynb"


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    solutions = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 2, "the solutions of exercises 1 and 2"
    notebook, root = run_once(tmp_path_factory, NAME, {}, solutions)
    assert sorted(p.name for p in root.iterdir()) == ["14_procedures"], "it wrote only inside its own workspace"
    return notebook


def test_the_checks_hold_before_the_exercises(exercises_run):
    assert checks_held(exercises_run), ledger_text(exercises_run)


def test_exercise_1_the_owner_says_no(exercises_run):
    text = printed(exercises_run)
    assert "stored: ['Always answer in metric units.', 'Always include the ticket number.']" in text
    assert "ada answers 'no'" in text
    session_4 = next(line for line in text.splitlines() if line.startswith("session 4: "))
    assert "11 am" in session_4 and "4.6 m" in session_4 and "OPS-7002" in session_4, session_4


def test_exercise_2_the_same_session(exercises_run):
    text = printed(exercises_run)
    assert "“Always write dates as YYYY-MM-DD.”" in text
    assert "last call's instructions end: - Always write dates as YYYY-MM-DD." in text, "the turn after the yes"
    last = next(line for line in text.splitlines() if line.startswith("last reply: "))
    assert "2026-03-05" in last, last


def test_the_same_person_as_owner_and_other_participant_is_refused(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="owner and other_participant must differ"):
        refuse(NAME, {"workspace": "ex_14b", "owner": "ada", "other_participant": "ada"})
    assert not (workspace_root / "ex_14b").exists(), "nothing is created before the parameters are checked"
