"""Notebook 04's exercises, replayed: one run with exercise 3's parameters, the solutions of 1 and 2 appended (they
build agents of their own, with no session, and read nothing the notebook's checks read), then "Check yourself" again;
the refusals on their own runs, which stop at the setup cell. The smallest accepted values are the class replay's run
(classes/sample.yaml), read from tests/conftest.py's `series_replay`."""

from __future__ import annotations

import re

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, replayed, run_once, solution_code

NAME = "04_state_manifest.ipynb"


def check_cell() -> str:
    """The code cell of "Check yourself", to run again after the exercises."""
    cells = nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4).cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    (cell,) = [c.source for c in cells[start + 1:] if c.cell_type == "code"][:1]
    return cell


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    solutions = solution_code(nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 2, "the solutions of exercises 1 and 2"
    notebook, _ = run_once(tmp_path_factory, NAME, {"window_size": 4, "turns": 9}, [*solutions, check_cell()])
    return notebook


def test_exercise_1_a_fact_no_message_said(exercises_run):
    text = printed(exercises_run)
    assert "without the hook: I cannot see your plan in this conversation." in text
    assert "with the hook: Your plan is pro." in text


def test_exercise_2_everything_in_the_state_rides_on_every_call(exercises_run):
    text = printed(exercises_run)
    lean, bulky = map(int, re.search(r"input tokens: (\d+) with the codename alone, (\d+) with the note", text).groups())
    assert bulky - lean == 503, (lean, bulky)  # exercise 2: "You should see (+503)"
    assert "replies: Your codename is ORION. / Your codename is ORION." in text


def test_exercise_3_a_smaller_window(exercises_run):
    ledger = " ".join(ledger_text(exercises_run).split())  # the evidence lines, unwrapped
    assert checks_held(exercises_run), ledger
    assert "without [1, 2, 3], with [1, 2, 3]" in ledger
    assert "model calls of turns 4-9; turns whose call carries it: none" in ledger
    assert "reply: 'Your codename is ORION.'; turn 1 among the last model call's messages: False" in ledger


def test_the_checks_hold_again_after_the_exercises(exercises_run):
    headlines = re.findall(r"^Check yourself: .*$", ledger_text(exercises_run), re.MULTILINE)
    assert len(headlines) == 2 and all("FAIL" not in h and "not checked" not in h for h in headlines), headlines


def test_odd_window_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_04b").mkdir()
    (workspace_root / "ex_04b" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="window_size must be an even number"):
        notebook_runs.refuse(NAME, {"workspace": "ex_04b", "window_size": 3})
    assert (workspace_root / "ex_04b" / "keep.txt").read_text() == "keep"


def test_a_base_prompt_that_states_the_codename_is_refused(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="base_prompt must not contain the codename"):
        notebook_runs.refuse(NAME, {"workspace": "ex_04c", "base_prompt": "Your codename is ORION."})
    assert not (workspace_root / "ex_04c").exists()


def test_smallest_accepted_values_keep_the_checks(series_replay):
    """The smallest window and the fewest turns it accepts: (2, 2), the class replay's run (paraphrase voice, local
    Bedrock path). Two turns leave no turn after w/2 + 1: the checks of those turns, and the pinned restart whose
    window removed nothing, say why they are not checked, the branch no other run of 04 takes. The other
    smallest-values run this test had, (2, 4), is gone: it decides every check on the branch the default run (nbval's,
    and the recorded run of tests/test_checks_state_manifest.py) decides it."""
    notebook, _ = replayed(series_replay, NAME, {"window_size": 2, "turns": 2})
    assert checks_held(notebook), ledger_text(notebook)
    assert "not checked: 2 turns: turn 1 is still in the window at the last turn" in ledger_text(notebook)
