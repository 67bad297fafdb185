"""Notebook 02's exercises, replayed: each solution's code runs after the notebook, whose own checks still pass;
and a refused session id stops the notebook before its workspace is reset."""

from __future__ import annotations

from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, solution_code

NAME = "02_agent_json_anatomy.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells)


def test_code_exercises_1_to_3(tmp_path, workspace_root):
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    first, second, third = solution_code(notebook)
    result = run(tmp_path, {"workspace": "ex_02"}, [
        first,
        "assert agent_json_blocks(agent_json)['state']['visits'] == 3",
        second,
        "assert isinstance(agent.state.get('seen_at'), str)",
        third,
        "assert CountingStorage.writes == 6",
    ])
    text = printed(result)
    assert checks_held(result), ledger_text(result)
    assert "before the call: 1\nafter the call : 3\n" in text, "exercise 1: the file changes only with the call"
    assert "ValueError: Value is not JSON serializable: datetime" in text, "exercise 2 shows the SDK's refusal"
    assert "\nstr\n" in text, "exercise 2 stores the ISO text"
    assert "invocation 2\nmessage 6\n" in text, "exercise 3 counts the snapshot writes"
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_02"]


@pytest.mark.parametrize("parameter", ["session_id", "snapshot_session_id"])
def test_a_refused_session_id_stops_before_the_reset(tmp_path, workspace_root, parameter):
    kept = workspace_root / "ex_02_bad" / "keep.txt"
    kept.parent.mkdir()
    kept.write_text("from an earlier run")
    with pytest.raises(papermill.PapermillExecutionError, match="Unsafe session id"):
        run(tmp_path, {"workspace": "ex_02_bad", parameter: ".."})
    assert kept.read_text() == "from an earlier run", "the workspace was not emptied"
    assert [p.name for p in kept.parent.iterdir()] == ["keep.txt"], "no session_.. directory was created"
