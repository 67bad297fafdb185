"""Notebook 00's exercises, replayed: one run with exercise 4's parameters (Ada, 7) and the solutions of exercises 1 to
3 appended, then "Check yourself" again (it reads only the first calls, so it still holds), then $WORKBOOK_BACKEND=bedrock
and "Check yourself" a third time; each bad parameter in a run of its own, which stops at the setup cell."""

from __future__ import annotations

import re

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, run_once, solution_code

NAME = "00_orientation.ipynb"

# Another backend, without calling it: the check cell runs again with $WORKBOOK_BACKEND=bedrock (the agents it reads
# ran on the offline model). Only the checks of the offline model's own rules may be skipped.
OTHER_BACKEND = """
import os
os.environ["WORKBOOK_BACKEND"], backend = "bedrock", None
print("backend now:", os.environ["WORKBOOK_BACKEND"])
"""


def check_cell(notebook: nbformat.NotebookNode) -> str:
    (cell,) = [c.source for c in notebook.cells if c.cell_type == "code" and "orientation.claims(" in c.source]
    return cell


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    """The solutions of exercises 1 to 3 each work on their own names or append to an agent the checks read only the
    first calls of; exercise 4 is the run's parameters. The backend switch comes after all of them."""
    notebook = nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4)
    solutions = solution_code(notebook)
    assert len(solutions) == 3, "the solutions of exercises 1, 2 and 3"
    check = check_cell(notebook)
    return run_once(tmp_path_factory, NAME, {"workspace": "ex_00", "user_name": "Ada", "favorite_number": 7},
                    [*solutions, check, OTHER_BACKEND, check])


def test_exercise_4_other_facts(exercises_run):
    result, root = exercises_run
    text = printed(result)
    assert "agent: Your name is Ada and your favorite number is 7." in text
    assert "Pin" not in text and not re.search(r"\b42\b", text), "the default facts are gone from the replay"
    assert "'My name is Ada and my favorite number is 7." in ledger_text(result), "the ledger read the new facts"
    assert sorted(p.name for p in root.iterdir()) == ["ex_00"], "it wrote only in its own folder"


def test_exercise_1_the_stranger_answers_once_told(exercises_run):
    assert "Your name is Ada." in printed(exercises_run[0]).splitlines()


def test_exercise_2_two_messages_a_turn(exercises_run):
    assert re.search(r"1 turns: 2 messages\n2 turns: 4 messages\n3 turns: 6 messages\n", printed(exercises_run[0]))


def test_exercise_3_the_latest_statement_wins(exercises_run):
    assert "before: Your favorite number is 7. | after: Your favorite number is 8." in printed(exercises_run[0])


def test_the_checks_hold_again_after_the_exercises(exercises_run):
    ledgers = ledger_text(exercises_run[0]).split("Check yourself: ")[1:]
    assert len(ledgers) == 3, "the notebook's ledger, again after the solutions, then on the other backend"
    assert ledgers[0].splitlines()[0] == ledgers[1].splitlines()[0] == "6 of 6 claims hold (19 of 19 checks hold)"


def test_on_another_backend_only_the_offline_models_rules_are_skipped(exercises_run):
    result, _ = exercises_run
    assert "backend now: bedrock" in printed(result)
    assert checks_held(result), ledger_text(result)
    other = ledger_text(result).split("Check yourself: ")[-1]
    skipped = [line for line in other.splitlines() if line.startswith("– [")]
    assert skipped == ["– [S2] its reply depends on the call alone: fresh models give the same three replies",
                       "– [S2] the offline model does not guess: asked for what no call stated, its replies state "
                       "no value"], other
    assert other.count("not checked: ") == 2, "each skipped check says why"


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"user_name": "  "}, "user_name must be a non-empty text"),
        ({"user_name": "Dr. Who"}, "user_name must be a name the offline model reads back whole"),
        ({"favorite_number": "seven"}, "favorite_number must be a whole number"),
    ],
)
def test_a_bad_parameter_stops_before_the_workspace_is_reset(parameters, message, tmp_path, workspace_root):
    (workspace_root / "ex_00_bad").mkdir()
    (workspace_root / "ex_00_bad" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        notebook_runs.refuse(NAME, {"workspace": "ex_00_bad", **parameters})
    assert (workspace_root / "ex_00_bad" / "keep.txt").read_text() == "keep"
