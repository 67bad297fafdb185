"""Notebook 00's exercises, replayed: the parameter exercise through papermill, the code exercises by running the
solution code from the notebook's own Solution block after the notebook's cells."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK = NOTEBOOKS / "00_orientation.ipynb"


def run(path: Path, tmp_path: Path, parameters: dict) -> str:
    """Execute a notebook as the replays do and return everything its code cells printed."""
    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(path),
        str(output),
        parameters={"backend": "offline", **parameters},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
        execution_timeout=300,
    )
    notebook = nbformat.read(output, as_version=4)
    return "".join(
        out.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
    )


def solution_code() -> list[str]:
    """The ```python blocks of the notebook's Solution, in order."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    solution = next(c.source for c in notebook.cells if c.cell_type == "markdown" and "<summary>Solution" in c.source)
    return re.findall(r"```python\n(.*?)```", solution, re.DOTALL)


def test_exercise_1_replay_with_other_facts(tmp_path, workspace_root):
    printed = run(NOTEBOOK, tmp_path, {"workspace": "ex_00a", "user_name": "Ada", "favorite_number": 7})
    assert "agent: Your name is Ada and your favorite number is 7." in printed
    assert "All checks passed." in printed
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_00a"]


def test_code_exercises_2_to_4_run_after_the_notebook(tmp_path, workspace_root):
    blocks = solution_code()
    assert len(blocks) == 3, "exercises 2, 3 and 4 each have solution code"
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells += [nbformat.v4.new_code_cell(block) for block in blocks]
    path = tmp_path / "with_solutions.ipynb"
    nbformat.write(notebook, path)
    printed = run(path, tmp_path, {"workspace": "ex_00b"})
    assert "All checks passed." in printed
    assert "Your favorite number is 7." in printed  # exercise 2: the latest statement wins
    assert "Noted: your shoe size is 38." in printed and "Your shoe size is 38." in printed  # exercise 3
    assert "I cannot see your shoe size in this conversation." in printed  # exercise 3: the stranger
    assert "3 turns: 6 messages" in printed  # exercise 4


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"user_name": "  "}, "user_name must be a non-empty text"),
        ({"user_name": "Dr. Who"}, "user_name must be a name the offline model reads back whole"),
        ({"favorite_number": "seven"}, "favorite_number must be a whole number"),
    ],
)
def test_invalid_parameters_stop_with_a_reason(parameters, message, tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        run(NOTEBOOK, tmp_path, {"workspace": "ex_00_bad", **parameters})
