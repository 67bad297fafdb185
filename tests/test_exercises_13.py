"""Notebook 13's exercises, replayed with their solutions: the notebook's claims ledger must still hold, and each
exercise must show the difference from the baseline (the committed run) that it promises."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import papermill
import pytest

from tests.notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, run, solution_code

NAME = "13_learning_from_experience.ipynb"
LINE = re.compile(r"^repeated mistakes: (\d+)/(\d+) without recall, (\d+)/(\d+) with recall at .*$", re.MULTILINE)


EPISODES = re.compile(r"^episodes injected into the recall run's calls: (\d+)$", re.MULTILINE)


def episodes_injected(notebook: nbformat.NotebookNode) -> int:
    """Episodes the recall run's calls received in all, from the line under the first table."""
    return int(EPISODES.search(printed(notebook)).group(1))


def committed() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / NAME, as_version=4)


def repeats(notebook: nbformat.NotebookNode) -> tuple[int, int]:
    """(repeated mistakes without recall, with recall), from the line under the first table."""
    k0, _, k1, _ = LINE.search(printed(notebook)).groups()
    return int(k0), int(k1)


def recall_row(notebook: nbformat.NotebookNode) -> str:
    """The text form of the measured table's recall row."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            plain = output.get("data", {}).get("text/plain", "")
            if plain.lstrip().startswith("first mistakes"):
                return next(line for line in plain.splitlines() if line.startswith("episodic recall"))
    raise LookupError("no measured table")


def only_own_workspace(workspace_root: Path, name: str) -> None:
    assert sorted(p.name for p in workspace_root.iterdir()) == [name], "it wrote only inside its own workspace"


def test_exercise_1_a_stricter_threshold(tmp_path, workspace_root):
    executed = run(NAME, tmp_path, {"workspace": "ex_12a", "min_similarity": 0.9})
    assert checks_held(executed), ledger_text(executed)
    baseline, stricter = repeats(committed()), repeats(executed)
    assert stricter[0] == baseline[0], "without recall nothing changes"
    assert stricter[1] > baseline[1], "more repeated mistakes with recall"
    assert episodes_injected(executed) < episodes_injected(committed()), "fewer episodes injected"
    assert "0/12 = 0%" in recall_row(executed), "no wrong answer where the data was right"
    only_own_workspace(workspace_root, "ex_12a")


def test_exercise_2_two_episodes_per_call(tmp_path, workspace_root):
    executed = run(NAME, tmp_path, {"workspace": "ex_12b", "recall_k": 2})
    assert checks_held(executed), ledger_text(executed)
    baseline, two = repeats(committed()), repeats(executed)
    assert two[1] > baseline[1], "repeated mistakes come back"
    assert episodes_injected(executed) > episodes_injected(committed()), "more episodes injected"
    borrowed = [int(re.findall(r"(\d+)/\d+ = ", recall_row(nb))[2]) for nb in (committed(), executed)]
    assert borrowed[1] > borrowed[0], "more wrong answers where the data was right"
    only_own_workspace(workspace_root, "ex_12b")


def test_exercise_3_solution_code_runs_in_the_notebook(tmp_path, workspace_root):
    blocks = solution_code(committed())
    assert len(blocks) == 1
    executed = run(NAME, tmp_path, {"workspace": "ex_12c"}, blocks)
    assert checks_held(executed), ledger_text(executed)
    text = printed(executed)
    assert "stored: ['Always answer in metric units.', 'Always include the ticket number.']" in text
    session_4 = next(line for line in text.splitlines() if line.startswith("session 4: "))
    assert "11 am" in session_4 and "4.6 m" in session_4 and "OPS-7002" in session_4
    assert "-> ada answers 'no'" in text
    only_own_workspace(workspace_root, "ex_12c")


def test_the_same_person_as_owner_and_other_participant_is_refused(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="owner and other_participant must differ"):
        run(NAME, tmp_path, {"workspace": "ex_12d", "owner": "ada", "other_participant": "ada"})
    assert not (workspace_root / "ex_12d").exists(), "nothing is created before the parameters are checked"
