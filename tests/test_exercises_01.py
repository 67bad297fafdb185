"""Notebook 01's exercises, replayed: each solution's code runs after the notebook, each parameter change through
papermill, and the notebook's own checks still pass; bad parameters stop it before its workspace is reset."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, solution_code

NAME = "01_restart_test.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells)


FILES_BEFORE = "print('files before:', len(message_files(storage_dir, session_id)))"


@pytest.fixture(scope="module")
def with_solutions(tmp_path_factory):
    """One run of the notebook with the solutions of exercises 3, 1, 2 and 5 appended, each in a new cell after
    "Check yourself": exercise 3 first (it reads the session's first reply before exercises 1 and 2 add turns to that
    session; it writes nothing), exercise 5 last (it repairs the crash sessions, which no other solution touches)."""
    first, second, third, fifth = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    result, workspace = notebook_runs.run_once(tmp_path_factory, NAME, {"workspace": "ex_01a"},
                                               [third, FILES_BEFORE, first, second, fifth])
    return result, workspace, third


def test_code_exercises_1_and_2(with_solutions):
    result, workspace_root, _ = with_solutions
    text = printed(result)
    assert checks_held(result), ledger_text(result)
    assert "files before: 4\n8\n" in text, "exercise 1: 8 message files where Phase 2 left 4"
    replies = [line for line in text.splitlines() if line.startswith("reply: ")]
    assert replies[-1] == "reply: Your name is Pin and your favorite number is 7.", "exercise 2: 7 comes back"
    assert "reply: Your name is Pin and your favorite number is 42." in replies, "where Phase 2 answered 42"
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_01a"]


def exercise_3_fields(result: nbformat.NotebookNode, source: str) -> dict:
    """The JSON line the exercise 3 solution (the cell `source`) printed."""
    return json.loads(notebook_runs.cell_stdout(result, source).strip().splitlines()[-1])


def test_code_exercise_3_run_twice(with_solutions, tmp_path, workspace_root):
    """Exercise 3 compares two runs of the notebook: the timestamps and the tracking id change, the rest stays. The
    first run is the shared one above; the second is a run of its own, after it."""
    earlier, _, third = with_solutions
    later = run(tmp_path, {"workspace": "ex_01c"}, [third])
    runs = []
    for result in (earlier, later):
        assert checks_held(result), ledger_text(result)
        runs.append(exercise_3_fields(result, third))
    first, second = runs
    assert set(first) == {"message_id", "role", "text", "tracking_id", "created_at", "updated_at"}
    for field in ("created_at", "updated_at", "tracking_id"):
        assert first[field] != second[field], f"{field} changes on a second run"
    assert first["created_at"] < second["created_at"], "the second run's message is newer"
    for field in ("message_id", "role", "text"):
        assert first[field] == second[field], f"{field} stays the same"
    assert (first["message_id"], first["role"]) == (1, "assistant")
    assert first["text"] == "Noted: your name is Pin and your favorite number is 42."


def test_exercise_4_three_writers(tmp_path, workspace_root):
    result = run(tmp_path, {"workspace": "ex_01b", "writers": 3})
    text = printed(result)
    assert checks_held(result), ledger_text(result)
    ledger = " ".join(ledger_text(result).split())  # the evidence as one line, whatever its wrapping
    assert "table vs recount: [4, 0]" in ledger, "4 new messages lost without the lock, 0 with it"
    assert "message files 4, 2 of them from before the writers; writer prompts on disk under ids [2]" in ledger, (
        "1 of the 3 writer prompts on disk without the lock")
    assert "new messages lost 0; writer prompts under ids [2, 4, 6]" in ledger, "all 3 with it"
    assert "writer-c: messages restored: 2" in text
    assert "messages restored by each writer, sorted: [2, 4, 6]" in text


def test_code_exercise_5_nothing_left_to_repair(with_solutions):
    """A second repair writes nothing: the repaired session ends with an answer, the copy with a user message."""
    result, _, _ = with_solutions
    assert checks_held(result), ledger_text(result)
    assert "repair wrote: ['message_2.json', 'message_3.json']" in printed(result), "the baseline: two files"
    (output,) = [o for o in result.cells[-1].outputs if o.get("name") == "stdout"]
    assert output["text"].splitlines() == ["crash-demo [] 8", "crash-as-is [] 5"]


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
        run(tmp_path, {"workspace": "ex_01_bad", **parameters})
    assert [p.name for p in kept.parent.iterdir()] == ["keep.txt"], "the workspace was not emptied, nothing was written"
