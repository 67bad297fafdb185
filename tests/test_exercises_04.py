"""Notebook 04's exercises, replayed: each solution's code runs in a new cell after "Check yourself" and prints the
difference from the baseline that the exercise promises; re-running the checks afterwards still holds (the solutions
use names of their own); bad parameters stop it with a reason; the smallest accepted values keep the checks."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, solution_code

NAME = "04_state_manifest.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells)


def check_cells() -> list[str]:
    """The code cells of "Check yourself", to run again after the exercises."""
    cells = nbformat.read(NOTEBOOKS / NAME, as_version=4).cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    end = next(i for i in range(start + 1, len(cells)) if cells[i].cell_type == "markdown")
    return [c.source for c in cells[start + 1 : end]]


def test_code_exercises_1_to_3(tmp_path, workspace_root):
    plan, append, note = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    notebook = run(tmp_path, {"workspace": "ex_04a"}, [plan, append, note, *check_cells()])
    text = printed(notebook)
    assert checks_held(notebook), ledger_text(notebook)
    assert ledger_text(notebook).count("21 of 21 claims hold") == 2, "the checks hold again after the exercises"
    # 1: the answer comes from the manifest; without the hook the same state gives none
    assert "without the hook: I cannot see your plan in this conversation." in text
    assert "with the hook   : Your plan is pro." in text
    # 2: one manifest per invocation, a surcharge that grows every turn against the rebuilding hook's fixed one
    assert "manifests at the end: 7" in text
    growth = [int(n) for n in re.search(r"appending :\s*\[([^\]]*)\]", text).group(1).split(",")]
    fixed = [int(n) for n in re.search(r"rebuilding:\s*\[([^\]]*)\]", text).group(1).split(",")]
    assert fixed == [12] * 7, fixed
    assert all(11 <= b - a <= 12 for a, b in zip(growth, growth[1:])), growth  # about manifest_tokens more each turn
    assert growth[0] == 12, growth
    assert re.search(r"last reply: .*ORION", text)
    # 3: the note costs about 500 input tokens more than the codename alone, and the answer stays
    lean, bulky = map(int, re.search(r"input tokens: (\d+) with the codename alone, (\d+) with the note", text).groups())
    assert 495 <= bulky - lean <= 510, (lean, bulky)
    assert "replies: Your codename is ORION. / Your codename is ORION." in text


@pytest.mark.parametrize("window_size, turns", [(2, 2), (2, 4)])
def test_smallest_accepted_values_keep_the_checks(tmp_path, workspace_root, window_size, turns):
    notebook = run(tmp_path, {"workspace": f"ex_04_{window_size}_{turns}", "window_size": window_size, "turns": turns})
    assert checks_held(notebook), ledger_text(notebook)


def test_odd_window_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="window_size must be an even number"):
        run(tmp_path, {"workspace": "ex_04b", "window_size": 3})
