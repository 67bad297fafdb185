"""Notebook 13's exercises, replayed: exercise 1's threshold in a run of its own and exercise 2's recall_k in the class
replay (classes/sample.yaml gives it; both change every count the other exercise reads, so they cannot share a run),
each with the numbers its "you should see" promises and the ledger holding; and a threshold above the sweep's, refused
before the workspace is reset."""

from __future__ import annotations

import re

import nbformat
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, refuse, replayed, run_once

NAME = "13_episodes.ipynb"
INJECTED = re.compile(r"^episodes injected in the recall run: (\d+)$", re.MULTILINE)


def recall_row(notebook: nbformat.NotebookNode) -> str:
    """The text form of the measured table's recall row."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            plain = output.get("data", {}).get("text/plain", "")
            if plain.lstrip().startswith("first mistakes"):
                return next(line for line in plain.splitlines() if line.startswith("episodic recall"))
    raise LookupError("no measured table")


def injected(notebook: nbformat.NotebookNode) -> int:
    return int(INJECTED.search(printed(notebook)).group(1))


@pytest.fixture(scope="module")
def stricter(tmp_path_factory):
    notebook, root = run_once(tmp_path_factory, NAME, {"min_similarity": 0.9})
    assert sorted(p.name for p in root.iterdir()) == ["13_episodes"], "it wrote only inside its own workspace"
    return notebook


def test_exercise_1_a_stricter_threshold(stricter):
    assert checks_held(stricter), ledger_text(stricter)
    assert injected(stricter) == 13
    row = recall_row(stricter)
    assert "11/18 = 61%" in row and "0/12 = 0%" in row, row


def test_exercise_2_two_episodes_a_call(series_replay):
    """The class replay's run of 13 (paraphrase voice, local Bedrock path): the episodes injected and the mistakes
    counted follow the tasks' embeddings and the offline model's rules, not its words."""
    two_a_call, _ = replayed(series_replay, NAME, {"recall_k": 2})
    assert checks_held(two_a_call), ledger_text(two_a_call)
    assert injected(two_a_call) == 52
    row = recall_row(two_a_call)
    assert "3/18 = 17%" in row and "4/12 = 33%" in row, row
    assert "0.7 was picked on the sweep at recall_k=1" in ledger_text(two_a_call)


def test_a_threshold_above_the_sweeps_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_13c").mkdir()
    (workspace_root / "ex_13c" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="min_similarity must be a number in"):
        refuse(NAME, {"workspace": "ex_13c", "min_similarity": 0.95})
    assert (workspace_root / "ex_13c" / "keep.txt").read_text() == "keep"
