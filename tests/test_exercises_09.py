"""Notebook 09's exercises, replayed with their solutions: the notebook's checks must still hold."""

from __future__ import annotations

import re

import nbformat
import papermill
import pytest

from tests.notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, run, solution_code

NAME = "09_forgetting_on_purpose.ipynb"


def shown(cell: nbformat.NotebookNode) -> str:
    """What a cell showed: its printed text and the text form of its tables."""
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))


def test_exercises_1_2_and_4_solution_code_runs_in_the_notebook(tmp_path, workspace_root):
    blocks = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    assert len(blocks) == 3
    # After the exercises, "Check yourself" is run again: the exercises' folders are outside what it scans.
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    checks = [c.source for c in notebook.cells if c.cell_type == "code" and c.get("id", "").startswith("n09-check-")]
    assert len(checks) >= 2
    executed = run(NAME, tmp_path, {"workspace": "ex_09a"}, [*blocks, *checks])
    missed, unscoped, orphan = (executed.cells[i - len(checks)] for i in (-3, -2, -1))
    assert not any(o.get("output_type") == "error" for c in executed.cells for o in c.get("outputs", []))
    assert checks_held(executed), ledger_text(executed)
    assert ledger_text(executed).count("claims hold") == 2, "the checks ran twice, before and after the exercises"
    # Exercise 1: the scan finds the fact once, in agent.json's summary, and nowhere else (the baseline: 0).
    assert "conversation_manager_state.summary_message.content[0].text" in shown(missed)
    assert shown(missed).count("agent.json") == 1
    assert "places left: 1 (after the notebook's own forget: 0)" in shown(missed)
    # Exercise 2: the other user's count drops in each of the five stores.
    table = shown(unscoped)
    for store in ("session messages", "summary", "agent.state", "vector store", "markdown"):
        row = re.search(rf"^{re.escape(store)}\s+(\d+)\s+(\d+)\s*$", table, re.MULTILINE)
        assert row, (store, table)
        assert int(row.group(2)) < int(row.group(1)), (store, row.group(0))
    assert re.search(r"^vector store\s+4\s+3\s*$", table, re.MULTILINE)
    assert re.search(r"^markdown\s+4\s+3\s*$", table, re.MULTILINE)
    assert re.search(r"^agent\.state\s+4\s+3\s*$", table, re.MULTILINE)
    # Exercise 4: a note written without lineage survives the forget, and the paraphrase check finds that line alone.
    assert "places the paraphrase check finds: 1 (after the notebook's own forget: 0)" in shown(orphan)
    assert "home address: Harbour Lane, no. 12" in shown(orphan)
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_09a"]
    assert {p.name for p in (workspace_root / "ex_09a").iterdir() if p.is_dir()} >= {"stores", "exercise-1", "exercise-2",
                                                                                     "exercise-4"}


def test_exercise_3_another_fact_and_other_users(tmp_path, workspace_root):
    parameters = {"workspace": "ex_09b", "fact_key": "phone number", "value": "555-0142", "other_value": "555-0199",
                  "user": "lin", "other_user": "sam"}
    executed = run(NAME, tmp_path, parameters)
    text = printed(executed)
    assert "lin forgets the phone number '555-0142'; sam's is '555-0199'" in text
    assert re.search(r"before forget: \d+ places", text) and "after forget: 0 places" in text
    ledger = ledger_text(executed)
    assert checks_held(executed), ledger
    assert "– [S1] in the default run: 11 distinct places (9 + 1 + 1)" in ledger, "skipped, with its reason"
    assert "✓ [S1] before: the fact was in all five stores" in ledger
    assert sorted(p.name for p in workspace_root.iterdir()) == ["ex_09b"]


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"user": "ada", "other_user": "ada"}, "user and other_user must differ"),
        ({"value": "Vim"}, "must not occur in"),
        ({"backend": "nova"}, "Unknown model backend 'nova'"),
    ],
    ids=["same-user", "value-in-the-conversation", "unknown-backend"],
)
def test_bad_parameters_stop_before_anything_is_written(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        run(NAME, tmp_path, {"workspace": "ex_09c", **parameters})
    assert not (workspace_root / "ex_09c").exists(), "refused before the workspace was reset"
