"""Notebook 01's exercises, replayed: one run with exercise 2's parameter (writers = 3) and the solutions of exercises
1 and 3 appended, then "Check yourself" once more (the exercises write to folders of their own, so the ledger still
holds); bad parameters stop the notebook before its workspace is reset, each in a run of its own."""

from __future__ import annotations

import re

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, run_once, solution_code

NAME = "01_restart_test.ipynb"


def check_cell(notebook: nbformat.NotebookNode) -> str:
    """The source of the notebook's "Check yourself" code cell."""
    (source,) = [c.source for c in notebook.cells if c.cell_type == "code" and "restart_test.claims" in c.source]
    return source


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    solutions = solution_code(notebook)
    assert len(solutions) == 2, "the solutions of exercises 1 and 3"
    result, root = run_once(tmp_path_factory, NAME, {"workspace": "ex_01", "writers": 3},
                            [*solutions, check_cell(notebook)])
    return result, root


def one_line(text: str) -> str:
    """The ledger's evidence as one line, whatever its wrapping."""
    return " ".join(text.split())


def test_exercise_1_a_session_of_your_own(exercises_run):
    result, _ = exercises_run
    text = printed(result)
    assert "reply: Your name is Pin and your favorite number is 7." in text, "the latest statement wins"
    assert "message files: 6" in text, "three turns, two files each"
    assert "reply: Your name is Pin and your favorite number is 42." in text, "where the lesson's recall said 42"


def writer_rows(notebook: nbformat.NotebookNode) -> list[tuple[str, int, str, bool, int]]:
    """The writers' table as the lesson shows it: (session, restored, wrote files, its prompt on disk, exit code)."""
    (cell,) = [c for c in notebook.cells if c.cell_type == "code" and "race_writers(" in c.source]
    text = "\n".join(o["data"]["text/plain"] for o in cell.outputs if o.output_type == "display_data")
    found = re.findall(r"^(no-lock|with-lock) +(\d+) +(message_\d+\.json, message_\d+\.json) +(True|False) +(\d+)$",
                       text, re.MULTILINE)
    return [(session, int(restored), wrote, kept == "True", int(code)) for session, restored, wrote, kept, code in found]


def test_exercise_2_three_writers(exercises_run):
    result, _ = exercises_run
    ledger = one_line(ledger_text(result))
    assert "printed vs recount: {'no-lock': 4, 'with-lock': 0}" in ledger, "4 lost without the lock, 0 with it"
    assert "restored by each writer: [2, 4, 6]" in ledger
    assert "(restored, now) [(2, 4), (2, 4), (2, 4)]; wrote [[2, 3], [2, 3], [2, 3]]; exit codes [0, 0, 0]; " \
           "4 message files; writer prompts under ids [2]" in ledger, "1 of the 3 writer prompts on disk without the lock"
    text = printed(result)
    assert "no-lock: 4 message files, 4 messages lost" in text and "with-lock: 8 message files, 0 messages lost" in text
    pair = "message_{}.json, message_{}.json".format
    assert writer_rows(result) == [("no-lock", 2, pair(2, 3), False, 0)] * 2 + [("no-lock", 2, pair(2, 3), True, 0)] + [
        ("with-lock", 2, pair(2, 3), True, 0), ("with-lock", 4, pair(4, 5), True, 0),
        ("with-lock", 6, pair(6, 7), True, 0)], \
        "the lesson's table: one row per writer, what it restored, the files it wrote, whether its prompt survived"


def test_exercise_3_a_damaged_file(exercises_run):
    result, _ = exercises_run
    text = printed(result)
    assert "SessionException: Invalid JSON in file" in text and "message_1.json" in text


def test_check_yourself_again_after_the_exercises_still_holds(exercises_run):
    result, root = exercises_run
    assert len(notebook_runs.LEDGER_HEADLINE.findall(ledger_text(result))) == 2, "the ledger, then again"
    assert checks_held(result), ledger_text(result)
    assert sorted(p.name for p in root.iterdir()) == ["ex_01"], "everything inside the notebook's own workspace"


@pytest.mark.parametrize("parameters, message", [
    ({"session_id": ".."}, "Unsafe session id"),
    ({"other_session_id": "team/alice"}, "Unsafe session id"),
    ({"other_session_id": "restart-demo"}, "session_id and other_session_id must differ"),
    ({"writers": 1}, "writers must be a whole number from 2 to 4"),
])
def test_bad_parameters_stop_before_the_reset(tmp_path, workspace_root, parameters, message):
    kept = workspace_root / "ex_01_bad" / "keep.txt"
    kept.parent.mkdir()
    kept.write_text("from an earlier run")
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        notebook_runs.refuse(NAME, {"workspace": "ex_01_bad", **parameters})
    assert [p.name for p in kept.parent.iterdir()] == ["keep.txt"], "the workspace was not emptied, nothing was written"
