"""Notebook 08's exercises, replayed with their solutions: the notebook's checks must still pass."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "08_what_to_remember.ipynb"


def run(tmp_path: Path, parameters: dict, notebook: nbformat.NotebookNode | None = None) -> str:
    source = NOTEBOOK
    if notebook is not None:
        source = tmp_path / "with_solution.ipynb"
        nbformat.write(notebook, source)
    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(source), str(output), parameters={"backend": "offline", **parameters}, kernel_name="python3",
        cwd=str(NOTEBOOK.parent), progress_bar=False, execution_timeout=300,
    )
    executed = nbformat.read(output, as_version=4)
    text = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "All checks passed." in text
    return text


def only_own_workspace(workspace_root: Path, name: str) -> None:
    assert sorted(p.name for p in workspace_root.iterdir()) == [name], "it wrote only inside its own workspace"


def test_exercise_1_longer_conversation(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_08a", "turns": 60})
    assert "60 turns for ada" in text
    assert "extraction           60 turn calls,  60 extraction calls,   8 memories stored" in text
    ratio = float(re.search(r"dumping stored ([\d.]+) times as many memories", text).group(1))
    assert ratio == 120 / 8, "the dump grows with the conversation, extraction does not"
    only_own_workspace(workspace_root, "ex_08a")


def test_exercise_2_another_pair_of_users(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_08b", "user_a": "lin", "user_b": "sam"})
    assert "30 turns for lin, 5 for sam" in text and "sam, scoped:" in text
    only_own_workspace(workspace_root, "ex_08b")


def test_exercise_3_longer_time_to_live(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_08c", "ttl_days": 30})
    written, until = re.search(r"written (\S+) \| valid until (\S+)", text).groups()
    assert datetime.fromisoformat(until) - datetime.fromisoformat(written) == timedelta(days=30)
    assert "Your desk this week is B-12." in text and "I cannot see your desk this week" in text
    only_own_workspace(workspace_root, "ex_08c")


def test_exercise_4_solution_code_runs_in_the_notebook(tmp_path, workspace_root):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    solution = next(c.source for c in notebook.cells if c.cell_type == "markdown" and "<summary>Solution</summary>" in c.source)
    code = re.search(r"```python\n(.*?)```", solution, re.DOTALL).group(1)
    notebook.cells.append(nbformat.v4.new_code_cell(code))
    text = run(tmp_path, {"workspace": "ex_08d"}, notebook)
    assert "4 current memories: Your programming language is Go." in text
    only_own_workspace(workspace_root, "ex_08d")


def test_the_same_user_twice_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="user_a and user_b must differ"):
        run(tmp_path, {"workspace": "ex_08e", "user_a": "ada", "user_b": "ada"})
