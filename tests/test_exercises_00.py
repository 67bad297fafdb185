"""Notebook 00's exercises, replayed: the parameter exercise through papermill, the code exercises by running the
solution code from the notebook's own Solution block in new cells after "Check yourself", which is then run again."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import notebook_runs
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


# Another backend, without calling it: the check cells run again with $WORKBOOK_BACKEND=bedrock (the notebook's model
# stays the offline one). Only the rows about the offline model's own decisions or token count may be skipped.
OTHER_BACKEND = """
import os
os.environ["WORKBOOK_BACKEND"], backend = "bedrock", None
print("backend now:", resolve_backend(backend))
"""


@pytest.fixture(scope="module")
def solutions_then_other_backend(tmp_path_factory):
    """One run for the code exercises and the other backend: the solutions of exercises 2 to 4 in new cells after
    "Check yourself", the check cells again (they still hold), then $WORKBOOK_BACKEND=bedrock and the check cells a
    third time. Each solution works in its own names and sessions; the backend switch comes after all of them."""
    blocks = solution_code()
    checks = check_cells(nbformat.read(NOTEBOOK, as_version=4))
    result, workspace = notebook_runs.run_once(tmp_path_factory, NOTEBOOK.name, {"workspace": "ex_00b"},
                                               [*blocks, *checks, OTHER_BACKEND, *checks])
    return notebook_runs.printed(result), result, len(blocks)


def test_code_exercises_2_to_4_run_after_the_check_cells(solutions_then_other_backend):
    printed, result, solutions = solutions_then_other_backend
    assert solutions == 3, "exercises 2, 3 and 4 each have solution code"
    assert checks_held(result), ledger_text(result)
    assert ledger_text(result).count("23 of 23 claims hold") == 2, "the checks hold before and after the exercises"
    # exercise 2: the baseline's number, then the latest statement
    assert "before: Your favorite number is 42. | after: Your favorite number is 7." in printed
    # exercise 3: unknown before it is said, known after, never seen by the stranger
    assert (
        "before: I cannot see your shoe size in this conversation. | after: Your shoe size is 38. "
        "| stranger: I cannot see your shoe size in this conversation." in printed
    )
    # exercise 4: two messages per turn
    assert re.search(r"1 turns: 2 messages\n2 turns: 4 messages\n3 turns: 6 messages\n", printed)


def test_on_another_backend_only_the_offline_rows_are_skipped(solutions_then_other_backend):
    printed, result, _ = solutions_then_other_backend
    assert "backend now: bedrock" in printed
    ledgers = ledger_text(result).split("Check yourself: ")[1:]
    assert len(ledgers) == 3, "the notebook's checks, again after the solutions, then on the other backend"
    offline, other = ledgers[0], ledgers[-1]
    assert offline.startswith("23 of 23 claims hold\n")
    assert other.startswith("20 of 23 claims hold, 3 not checked on this run\n"), other
    skipped = [line for line in other.splitlines() if line.startswith("– ")]
    assert skipped == [
        "– [S1] the offline model does not guess: its reply holds no digit and no name",
        "– [S1] its reply depends on the call alone: a fresh model gives the same",
        "– [S2] the offline model's input tokens are the SDK's estimate of the call",
    ]
    assert other.count("not checked: ") == 3, "each skipped row says why"


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
