"""Notebook 03's exercises, replayed: parameter changes through papermill with the notebook's checks still passing,
the solutions' code run after the notebook, and the check cell shown to refuse the old, wrong claim."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, printed, solution_code

NAME = "03_sliding_window.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells, defaults={"interactive": False})


def test_exercise_1_wider_window(tmp_path, workspace_root):
    text = printed(run(tmp_path, {"workspace": "ex_03a", "window_size": 10, "turns": 12}))
    assert "All checks passed." in text
    assert "last turn whose call got the codename: 6" in text
    assert re.search(r"first turn whose call did not\s*: 7 ", text)
    assert "first turn where kept < stored       : 6" in text


def test_exercise_2_odd_window_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_03b").mkdir()
    (workspace_root / "ex_03b" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="window_size must be an even number"):
        run(tmp_path, {"workspace": "ex_03b", "window_size": 5})
    assert (workspace_root / "ex_03b" / "keep.txt").read_text() == "keep"


def test_bad_session_id_is_refused_before_the_workspace_is_reset(tmp_path, workspace_root):
    (workspace_root / "ex_03c").mkdir()
    (workspace_root / "ex_03c" / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="Unsafe session id"):
        run(tmp_path, {"workspace": "ex_03c", "session_id": "../escape"})
    assert (workspace_root / "ex_03c" / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize("window_size, turns", [(2, 2), (2, 5)])
def test_smallest_accepted_values_keep_the_checks(tmp_path, workspace_root, window_size, turns):
    text = printed(run(tmp_path, {"workspace": f"ex_03_{window_size}_{turns}", "window_size": window_size, "turns": turns}))
    assert "All checks passed." in text


def test_code_exercises_3_and_4_and_the_check_refuses_the_old_claim(tmp_path, workspace_root):
    replant, pin = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    (check,) = [c.source for c in notebook.cells if c.cell_type == "code" and 'print("All checks passed.")' in c.source]
    old_claim = (
        "check_source = " + repr(check) + "\n"
        "rows_received = received\n"
        "received = per_turn_received  # a record where turn 1 is gone at turn w/2 + 1, as the old table claimed\n"
        "try:\n"
        "    exec(check_source)\n"
        "except AssertionError as refused:\n"
        "    print('refused the old claim:', refused)\n"
        "else:\n"
        "    raise SystemExit('the check accepted the old claim')\n"
        "received = rows_received  # put the notebook's own record back\n"
    )
    notebook_out = run(tmp_path, {"workspace": "ex_03d"}, [
        old_claim,
        replant + "\nassert codename in replant_rows[-1]['reply'], 'planted again, the codename is answered'\n"
                  "assert sum(contains_message([m], prompts[0]) for m in replant_received[-1]) == 1, 'one copy: turn 1 is gone'",
        pin + "\nassert all(row['codename received'] for row in pin_rows) and codename in pin_rows[-1]['reply']\n"
              "assert [row['received'] for row in pin_rows] == [1, 3, 5, 7, 9, 9, 9]\n"
              "assert len(pin_caught) == 1 and 'all messages in trim range are pinned' in pin_caught[0]",
        check,  # the solutions ran in new cells with fresh directories: the notebook's own checks still hold
    ])
    text = printed(notebook_out)
    assert text.count("All checks passed.") == 2, "the checks pass before and after the solutions"
    assert "refused the old claim:" in text
    assert "Your codename is ORION." in text
