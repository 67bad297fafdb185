"""Notebook 08's exercises, replayed: one run with exercise 4's parameter (turns = 60) and the solutions of 1-3 pasted
just above "Check yourself", where a learner who Runs All after pasting them puts them (each writes its own store or
reads before it moves the clock, and none changes what "Check yourself" reads: the checks after them must hold); and
the refusals, on their own."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, run_once, solution_code

NAME = "08_what_to_remember.ipynb"


def solutions() -> list[str]:
    code = solution_code(nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4))
    assert len(code) == 3, "the solutions of exercises 1-3"
    return code


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    return run_once(tmp_path_factory, NAME, {"turns": 60}, before_checks=solutions())


@pytest.fixture(scope="module")
def exercises_notebook(exercises_run):
    return exercises_run[0]


def test_exercise_1_save_immediately_misses_the_facts_said_in_passing_and_keeps_both_languages(exercises_notebook):
    assert ("5 memories; 3 of 7 answered; missed: ['editor', 'programming language', 'favorite number', 'timezone']"
            in printed(exercises_notebook))


def test_exercise_2_the_desk_is_answered_before_it_expires_not_after(exercises_notebook):
    text = printed(exercises_notebook)
    before = text.index("Your desk this week is B-12.")
    assert text.index("I cannot see your desk this week in this conversation.") > before
    ((written, until),) = re.findall(r"^\[\('([^']+)', '([^']+)'\)\]$", text, re.MULTILINE)
    assert datetime.fromisoformat(until) - datetime.fromisoformat(written) == timedelta(days=7)


def test_exercise_3_the_update_is_a_one_line_diff(exercises_notebook):
    lines = printed(exercises_notebook).splitlines()
    start = lines.index("--- before")
    changed = [line for line in lines[start + 2:] if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-- The user's programming language is Python.", "+- The user's programming language is Go."]
    assert sum(line.startswith("@@") for line in lines[start:]) == 1


def test_exercise_4_a_longer_conversation(exercises_notebook):
    text = printed(exercises_notebook)
    assert checks_held(exercises_notebook), ledger_text(exercises_notebook)
    assert "60 turns for ada, 5 for grace" in text
    assert re.search(r"dump\s+60 model calls, 120 memories stored", text)
    assert re.search(r"extraction\s+120 model calls, 8 memories stored", text)
    assert "records on disk: dump 120, extraction 8" in ledger_text(exercises_notebook)


def test_the_solutions_pasted_before_the_checks_leave_them_holding(exercises_run):
    """A learner who puts the cells above "Check yourself" (and Runs All) must not break the ledger: the exercises' run
    has them there."""
    executed, root = exercises_run
    at = next(i for i, c in enumerate(executed.cells)
              if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    assert [c.source for c in executed.cells[at - 3:at]] == solutions(), "the solutions run just above the checks"
    assert checks_held(executed), ledger_text(executed)
    assert sorted(p.name for p in root.iterdir()) == ["08_what_to_remember"], "it wrote only inside its own workspace"


def test_the_same_user_twice_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_08c").mkdir()
    (workspace_root / "ex_08c" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="user_a and user_b must differ"):
        notebook_runs.refuse(NAME, {"workspace": "ex_08c", "user_a": "ada", "user_b": "ada"})
    assert (workspace_root / "ex_08c" / "keep.txt").read_text() == "keep"


def test_too_few_turns_are_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="turns"):
        notebook_runs.refuse(NAME, {"workspace": "ex_08d", "turns": 11})
