"""Notebook 09's exercises, replayed with their solutions: the notebook's checks must still pass."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "09_forgetting_on_purpose.ipynb"


def run(tmp_path: Path, parameters: dict, notebook: nbformat.NotebookNode | None = None) -> nbformat.NotebookNode:
    source = NOTEBOOK
    if notebook is not None:
        source = tmp_path / "with_solutions.ipynb"
        nbformat.write(notebook, source)
    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(source), str(output), parameters={"backend": "offline", **parameters}, kernel_name="python3",
        cwd=str(NOTEBOOK.parent), progress_bar=False, execution_timeout=300,
    )
    executed = nbformat.read(output, as_version=4)
    assert "All checks passed." in printed(executed)
    return executed


def printed(notebook: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", []))


def shown(cell: nbformat.NotebookNode) -> str:
    """What a cell showed: its printed text and the text form of its tables."""
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))


def test_exercises_1_and_2_solution_code_runs_in_the_notebook(tmp_path, workspace_root):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    solution = next(c.source for c in notebook.cells if c.cell_type == "markdown" and "<summary>Solution</summary>" in c.source)
    blocks = re.findall(r"```python\n(.*?)```", solution, re.DOTALL)
    assert len(blocks) == 2
    for block in blocks:
        notebook.cells.append(nbformat.v4.new_code_cell(block))
    executed = run(tmp_path, {"workspace": "ex_09a"}, notebook)
    missed, unscoped = executed.cells[-2], executed.cells[-1]
    assert not any(o.get("output_type") == "error" for o in missed.outputs + unscoped.outputs)
    # Exercise 1: the scan finds the fact once, in agent.json's summary, and nowhere else.
    assert "conversation_manager_state.summary_message.content[0].text" in shown(missed)
    assert shown(missed).count("agent.json") == 1
    # Exercise 2: the other user's counts drop in every store (one statement of their address each, more in messages).
    assert re.search(r"vector store\s+4\s+3", shown(unscoped)) and re.search(r"markdown\s+4\s+3", shown(unscoped))
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_09a"]
    assert {p.name for p in (workspace_root / "ex_09a").iterdir() if p.is_dir()} >= {"exercise-1", "exercise-2"}


def test_exercise_3_another_fact_and_other_users(tmp_path, workspace_root):
    parameters = {"workspace": "ex_09b", "fact_key": "phone number", "value": "555-0142", "other_value": "555-0199",
                  "user": "lin", "other_user": "sam"}
    text = printed(run(tmp_path, parameters))
    assert "lin forgets the phone number '555-0142'; sam's is '555-0199'" in text
    assert "before forget: 12 places" in text and "after forget: 0 places" in text
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_09b"]


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"user": "ada", "other_user": "ada"}, "user and other_user must differ"),
        ({"value": "Vim"}, "must not occur in"),
    ],
    ids=["same-user", "value-in-the-conversation"],
)
def test_bad_parameters_stop_before_anything_is_written(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        run(tmp_path, {"workspace": "ex_09c", **parameters})
    assert not (workspace_root / "ex_09c").exists(), "refused before the workspace was reset"
