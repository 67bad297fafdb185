"""Notebook 02's exercises, replayed: each solution's code runs after the notebook, whose own checks still pass;
and a refused session id stops the notebook before its workspace is reset."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAME = "02_agent_json_anatomy.ipynb"


def solution_code(notebook: nbformat.NotebookNode) -> list[str]:
    """The ```python blocks of the notebook's hidden solution, in order (what a learner would paste)."""
    (cell,) = [c for c in notebook.cells if c.cell_type == "markdown" and "<summary>Solution</summary>" in c.source]
    blocks = re.findall(r"```python\n(.*?)```", cell.source, re.DOTALL)
    return ["\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines()) for block in blocks]


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in extra_cells]
    source, output = tmp_path / ("in_" + NAME), tmp_path / NAME
    nbformat.write(notebook, source)
    papermill.execute_notebook(
        str(source), str(output), parameters={"backend": "offline", **parameters}, kernel_name="python3",
        cwd=str(NOTEBOOKS), progress_bar=False, execution_timeout=300,
    )
    return nbformat.read(output, as_version=4)


def printed(notebook: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", []))


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
    assert "All checks passed." in text
    assert "before the call: 1\nafter the call : 3\n" in text, "exercise 1: the file changes only with the call"
    assert "ValueError: Value is not JSON serializable: datetime" in text, "exercise 2 shows the SDK's refusal"
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
