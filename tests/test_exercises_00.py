"""Notebook 00's exercises, replayed: the parameter exercise through papermill, the code exercises by running the
solution code from the notebook's own Solution block in new cells after "Check yourself", which is then run again."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import papermill
import pytest
from notebook_runs import checks_held, ledger_text

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK = NOTEBOOKS / "00_orientation.ipynb"


def run(path: Path, tmp_path: Path, parameters: dict) -> tuple[str, nbformat.NotebookNode]:
    """Execute a notebook as the replays do; return everything its code cells printed, and the run."""
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
    printed = "".join(
        out.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
    )
    return printed, notebook


def solution_code() -> list[str]:
    """The ```python blocks of the notebook's Solution, in order."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    solution = next(c.source for c in notebook.cells if c.cell_type == "markdown" and "<summary>Solution" in c.source)
    return re.findall(r"```python\n(.*?)```", solution, re.DOTALL)


def check_cells(notebook: nbformat.NotebookNode) -> list[str]:
    """The code cells of "Check yourself": from the first `Ledger()` to `ledger.report()`."""
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    start = next(i for i, source in enumerate(code) if "ledger = Ledger()" in source)
    end = next(i for i, source in enumerate(code) if "ledger.report()" in source)
    return code[start : end + 1]


def test_exercise_1_replay_with_other_facts(tmp_path, workspace_root):
    printed, notebook = run(NOTEBOOK, tmp_path, {"workspace": "ex_00a", "user_name": "Ada", "favorite_number": 7})
    assert "agent: Your name is Ada and your favorite number is 7." in printed
    assert "Pin" not in printed and "42" not in printed, "the default facts are gone from the replay"
    assert checks_held(notebook), ledger_text(notebook)
    assert "'My name is Ada and my favorite number is 7." in ledger_text(notebook), "the ledger read the new facts"
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_00a"]


def test_code_exercises_2_to_4_run_after_the_check_cells(tmp_path, workspace_root):
    blocks = solution_code()
    assert len(blocks) == 3, "exercises 2, 3 and 4 each have solution code"
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells += [nbformat.v4.new_code_cell(block) for block in blocks]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in check_cells(notebook)]  # the checks again
    path = tmp_path / "with_solutions.ipynb"
    nbformat.write(notebook, path)
    printed, result = run(path, tmp_path, {"workspace": "ex_00b"})
    assert checks_held(result), ledger_text(result)
    assert ledger_text(result).count("17 of 17 claims hold") == 2, "the checks hold before and after the exercises"
    # exercise 2: the baseline's number, then the latest statement
    assert "before: Your favorite number is 42. | after: Your favorite number is 7." in printed
    # exercise 3: unknown before it is said, known after, never seen by the stranger
    assert (
        "before: I cannot see your shoe size in this conversation. | after: Your shoe size is 38. "
        "| stranger: I cannot see your shoe size in this conversation." in printed
    )
    # exercise 4: two messages per turn
    assert re.search(r"1 turns: 2 messages\n2 turns: 4 messages\n3 turns: 6 messages\n", printed)


# Another backend, without calling it: the check cells run again with $WORKBOOK_BACKEND=bedrock (the notebook's model
# stays the offline one). Only the rows about the offline model's own decisions or token count may be skipped.
OTHER_BACKEND = """
import os
os.environ["WORKBOOK_BACKEND"], backend = "bedrock", None
print("backend now:", resolve_backend(backend))
"""


def test_on_another_backend_only_the_offline_rows_are_skipped(tmp_path, workspace_root):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells += [nbformat.v4.new_code_cell(OTHER_BACKEND)]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in check_cells(notebook)]
    path = tmp_path / "other_backend.ipynb"
    nbformat.write(notebook, path)
    printed, result = run(path, tmp_path, {"workspace": "ex_00c"})
    assert "backend now: bedrock" in printed
    offline, other = ledger_text(result).split("Check yourself: ")[1:]
    assert offline.startswith("17 of 17 claims hold\n")
    assert other.startswith("15 of 17 claims hold, 2 not checked on this run\n"), other
    skipped = [line for line in other.splitlines() if line.startswith("– ")]
    assert skipped == [
        "– [S1] the offline model does not guess: its reply states no fact",
        "– [S2] the offline model's input tokens are the SDK's estimate of the call",
    ]
    assert other.count("not checked: ") == 2, "each skipped row says why"


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
