"""Notebook 01's exercises, replayed: each solution's code runs after the notebook, each parameter change through
papermill, and the notebook's own checks still pass; bad parameters stop it before its workspace is reset."""

from __future__ import annotations

from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, printed, solution_code

NAME = "01_restart_test.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells)


def test_code_exercises_1_to_3(tmp_path, workspace_root):
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    first, second, third = solution_code(notebook)
    result = run(tmp_path, {"workspace": "ex_01a"}, [
        first,
        "assert len(message_files(storage_dir, session_id)) == 8",
        second,
        "assert '7' in run_phase(recall_prompt, backend=backend_name, session_id=session_id, "
        "storage_dir=storage_dir).stdout.split('reply:')[1]",
        third,
    ])
    text = printed(result)
    assert "All checks passed." in text
    assert "\n8\n" in text, "exercise 1 prints 8 message files"
    assert '"tracking_id"' in text and '"created_at"' in text, "exercise 3 printed message_1.json"
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_01a"]


def test_exercise_4_three_writers(tmp_path, workspace_root):
    text = printed(run(tmp_path, {"workspace": "ex_01b", "writers": 3}))
    assert "All checks passed." in text  # the check cell asserts writers - 1 = 2 turns lost without the lock, 0 with it
    assert "writer-c: messages restored: 2" in text
    assert "messages restored by each writer, sorted: [2, 4, 6]" in text


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
