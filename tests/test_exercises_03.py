"""Notebook 03's exercises, replayed: one run with exercise 1's parameters and the solutions of 3 and 4 appended (they
write to their own folders and read nothing the notebook's checks read), and exercise 2's refusal on its own."""

from __future__ import annotations

import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, run_once, solution_code

NAME = "03_sliding_window.ipynb"


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    import nbformat

    solutions = solution_code(nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 2, "the solutions of exercises 3 and 4"
    notebook, _ = run_once(tmp_path_factory, NAME, {"window_size": 10, "turns": 12, "interactive": False},
                           solutions)
    return notebook


def test_exercise_1_wider_window(exercises_run):
    assert checks_held(exercises_run), ledger_text(exercises_run)
    assert "turn 1 received by the calls of turns [1, 2, 3, 4, 5, 6]" in ledger_text(exercises_run)
    assert "turn 6: 11 messages, turn 1 among them: True" in ledger_text(exercises_run)


def test_exercise_3_saying_it_again_brings_it_back(exercises_run):
    replies = printed(exercises_run).splitlines()
    assert "Your codename is ORION." in replies


def test_exercise_4_the_default_window_forgets_at_turn_22(exercises_run):
    assert str(list(range(1, 22))) in printed(exercises_run)


def test_exercise_2_odd_window_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_03b").mkdir()
    (workspace_root / "ex_03b" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="window_size must be an even number"):
        notebook_runs.run(NAME, tmp_path, {"workspace": "ex_03b", "window_size": 5, "interactive": False})
    assert (workspace_root / "ex_03b" / "keep.txt").read_text() == "keep"


def test_bad_session_id_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_03c").mkdir()
    (workspace_root / "ex_03c" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="Unsafe session id"):
        notebook_runs.run(NAME, tmp_path, {"workspace": "ex_03c", "session_id": "../escape", "interactive": False})
    assert (workspace_root / "ex_03c" / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize("window_size, turns", [(2, 2), (2, 5)])
def test_smallest_accepted_values_keep_the_checks(tmp_path, workspace_root, window_size, turns):
    result = notebook_runs.run(NAME, tmp_path, {"workspace": f"ex_03_{window_size}_{turns}", "window_size": window_size,
                                                "turns": turns, "interactive": False})
    assert checks_held(result), ledger_text(result)
