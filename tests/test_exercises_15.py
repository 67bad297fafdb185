"""Notebook 15's exercises, replayed: one run with exercise 1's threshold and exercise 2's solution appended (the
solution consolidates its own copy of the history, after the checks have read the lesson's files, and prints the same
at any threshold), and a threshold above 1, refused before the workspace is reset."""

from __future__ import annotations

import re

import nbformat
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, refuse, run_once, solution_code

NAME = "15_consolidation.ipynb"


def before_and_after(notebook: nbformat.NotebookNode) -> dict[str, list[str]]:
    """The before-and-after table's cells, by measure (before, after), from its text form."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            plain = output.get("data", {}).get("text/plain", "")
            if "recall@3" in plain and "index rows" in plain:
                cells = [re.split(r"\s{2,}", line.strip()) for line in plain.splitlines()]
                return {row[0]: row[1:] for row in cells if len(row) == 3}
    raise LookupError("no before-and-after table")


def plain_outputs(notebook: nbformat.NotebookNode) -> list[str]:
    """Every line of every output's text form."""
    return [line for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
            for line in (output.get("text") or output.get("data", {}).get("text/plain", "")).splitlines()]


@pytest.fixture(scope="module")
def looser(tmp_path_factory):
    solutions = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 1, "the solution of exercise 2"
    notebook, root = run_once(tmp_path_factory, NAME, {"merge_threshold": 0.5}, solutions)
    assert sorted(p.name for p in root.iterdir()) == ["15_consolidation"], "it wrote only inside its own workspace"
    return notebook


def test_exercise_1_a_looser_threshold(looser):
    assert checks_held(looser), ledger_text(looser)
    text = printed(looser)
    assert "chosen on the tuning pairs: 0.786 | used: 0.5" in text
    assert "held-out: 40 pairs, accuracy 0.825" in text
    peanuts = next(line for line in plain_outputs(looser) if " merge " in line and "allergic to peanuts" in line)
    assert "m012" in peanuts.split("allergic")[0], peanuts
    rows = before_and_after(looser)
    assert rows["current memories"] == ["31", "17"], rows
    assert rows["recall@3"] == ["17 of 18 (0.944)", "17 of 18 (0.944)"], rows
    assert "merge_threshold 0.5 was set by hand" in ledger_text(looser)


def test_exercise_2_no_summaries(looser):
    assert "{'newest member'}" in printed(looser)


def test_a_threshold_above_1_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_15b").mkdir()
    (workspace_root / "ex_15b" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="merge_threshold must be a number in"):
        refuse(NAME, {"workspace": "ex_15b", "merge_threshold": 1.5})
    assert (workspace_root / "ex_15b" / "keep.txt").read_text() == "keep"
