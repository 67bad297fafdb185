"""Notebook 11's exercises, replayed: the parameter changes of exercises 1 to 3 in one papermill run (their checks
hold together), the code of exercise 4 executed after it; and a bad parameter stops the notebook before anything is
created."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, solution_code

NAME = "11_sessions_at_scale.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells)


def printed(notebook: nbformat.NotebookNode) -> str:
    return notebook_runs.printed(notebook, plain=True)


def test_exercises_1_to_4(tmp_path, workspace_root):
    (lock_code,) = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    result = run(tmp_path, {"workspace": "ex_11a", "users": 80, "turns": 3, "writers": 3, "workers": 1}, [
        "assert (back.sessions, back.messages, back.foreign_tags) == (80, 480, 0)",
        "assert [row['turns lost'] for row in lost_rows] == [2, 0] and lost_rows[0]['writer prompts in S3'] == 1",
        lock_code,
    ])
    text = printed(result)
    assert "All checks passed." in text
    assert "PutObject: 720 = 2 per turn x 240 turns + 240" in text
    assert "in the order they got the lock: [2, 4, 6]" in text
    assert re.search(r"LockTimeout: writer-b: the lock locks/stuck.lock was still held after 1 s", text)


def test_a_bad_parameter_stops_before_anything_is_created(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="bucket must be a name of your own"):
        run(tmp_path, {"workspace": "ex_11b", "endpoint": "aws"})
    assert not (workspace_root / "ex_11b").exists()
