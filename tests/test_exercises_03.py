"""Notebook 03's exercises, replayed: one run with exercise 1's parameters and the solutions of 3 and 4 appended (they
write to their own folders and read nothing the notebook's checks read), and exercise 2's refusal on its own. The
smallest accepted values are the class replay's run (classes/sample.yaml), read from tests/conftest.py's
`series_replay`."""

from __future__ import annotations

import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, replayed, run_once, solution_code

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
        notebook_runs.refuse(NAME, {"workspace": "ex_03b", "window_size": 5, "interactive": False})
    assert (workspace_root / "ex_03b" / "keep.txt").read_text() == "keep"


def test_bad_session_id_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_03c").mkdir()
    (workspace_root / "ex_03c" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="Unsafe session id"):
        notebook_runs.refuse(NAME, {"workspace": "ex_03c", "session_id": "../escape", "interactive": False})
    assert (workspace_root / "ex_03c" / "keep.txt").read_text() == "keep"


def test_smallest_accepted_values_keep_the_checks(series_replay):
    """The smallest window and the fewest turns it accepts: (2, 2), the class replay's run (paraphrase voice, local
    Bedrock path; the checks hold on both voices). Two turns are too few for the checks of the turns after w/2 + 1,
    which say why they are not checked: the branch no other run of 03 takes. The other smallest-values run this test
    had, (2, 5), is gone: it decides every check on the branch the default run (nbval's, and the recorded run of
    tests/test_checks_sliding_window.py) decides it, and a pinned window of 2 after its first trim, the one thing only
    it ran, is tests/test_model_calls.py's pin_first=2 window of 2 over three turns, in process."""
    result, _ = replayed(series_replay, NAME, {"window_size": 2, "turns": 2})
    assert checks_held(result), ledger_text(result)
    assert "not checked: 2 turns, fewer than w/2 + 2 = 3" in ledger_text(result)
