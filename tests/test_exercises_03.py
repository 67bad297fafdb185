"""Notebook 03's exercises, replayed: parameter changes through papermill with the notebook's ledger still holding,
the solutions' code run after the notebook, and the check cells shown to refuse the old, wrong claim."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, solution_code

NAME = "03_sliding_window.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells, defaults={"interactive": False})


def test_exercise_1_wider_window(tmp_path, workspace_root):
    result = run(tmp_path, {"workspace": "ex_03a", "window_size": 10, "turns": 12})
    text = printed(result)
    assert checks_held(result), ledger_text(result)
    assert "turn 1 received by turns [1, 2, 3, 4, 5, 6]" in ledger_text(result)
    # "the ledger hold every row it checks; the two rows that quote the default run's figures are marked not checked"
    report = ledger_text(result).split("Check yourself: ")[-1]
    assert report.startswith("18 of 20 claims hold, 2 not checked on this run\n"), report
    skipped = [line for line in report.splitlines() if line.startswith("– ")]
    assert skipped == ["– [S6] the summary's figures: 6 messages, 300,000 tokens, gone from turn 5",
                       "– [S6] and at most 55 input tokens in a call without it"], skipped
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
    result = run(tmp_path, {"workspace": f"ex_03_{window_size}_{turns}", "window_size": window_size, "turns": turns})
    assert checks_held(result), ledger_text(result)


def check_cells(notebook: nbformat.NotebookNode) -> list[str]:
    """The code cells of "Check yourself": from the one that creates the ledger to `ledger.report()`."""
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    start = next(i for i, source in enumerate(code) if "ledger = Ledger()" in source)
    end = next(i for i, source in enumerate(code) if "ledger.report()" in source)
    return code[start : end + 1]


# The old, wrong claim: turn 1 gone already at turn w/2 + 1. The per_turn=True run has exactly that shape, so its record
# stands in for the model's; the check cells must refuse it (their ledger is captured, so this run shows no failing one).
OLD_CLAIM = """
from IPython.utils.capture import capture_output
from companion.support.ledger import ClaimsNotHeld


class OldClaim:
    exchanges = [{"messages": m, "reply": r["reply"], "system_prompt": None, "tool_specs": [], "tool_input": ""}
                 for m, r in zip(per_turn_received, per_turn_rows)]
    calls = [{"input": r["input tokens"]} for r in per_turn_rows]


real_witness, witness = witness, OldClaim()
try:
    with capture_output():
        for source in CHECK_CELLS:
            exec(source)
except ClaimsNotHeld as refused:
    print("refused the old claim:", refused)
else:
    raise SystemExit("the check cells accepted the old claim")
finally:
    witness = real_witness  # put the notebook's own record back
"""


# Another backend, without calling it: $WORKBOOK_BACKEND=bedrock for the check cells (the model stays the offline one).
OTHER_BACKEND = """
import os
os.environ["WORKBOOK_BACKEND"], backend = "bedrock", None
print("backend now:", resolve_backend(backend))
"""


def test_code_exercises_3_and_4_and_the_check_refuses_the_old_claim(tmp_path, workspace_root):
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    replant, default_window = solution_code(notebook)
    checks = check_cells(notebook)
    result = run(tmp_path, {"workspace": "ex_03d"}, [
        f"CHECK_CELLS = {checks!r}\n" + OLD_CLAIM,
        replant,
        default_window,
        *checks,  # the solutions ran in new cells with fresh directories: the notebook's own checks still hold
        OTHER_BACKEND,
        *checks,  # on another backend only the row quoting the plain offline run's token count is skipped
    ])
    text = printed(result)
    assert checks_held(result), ledger_text(result)
    assert ledger_text(result).count("20 of 20 claims hold\n") == 2, "the checks hold before and after the solutions"
    assert "refused the old claim:" in text
    assert "[C1 S2] the call of turn w/2 + 1 still receives turn 1" in text, "the row the old claim breaks"
    # exercise 3: the replanted fact is answered, and the last call holds one copy of the sentence (the baseline none)
    assert "last reply: Your codename is ORION. | notebook's: I cannot see your codename in this conversation." in text
    assert "codename sentences in the last call: 1 | in the notebook's: 0" in text
    # exercise 4: the default window, run: last received at turn 21 (41 messages), gone at turn 22
    assert "received the codename: turns 1 to 21; turn 22: False; turn 21 received 41 messages" in text
    assert "backend now: bedrock" in text
    other = ledger_text(result).split("Check yourself: ")[-1]
    assert other.startswith("19 of 20 claims hold, 1 not checked on this run\n"), other
    skipped = [line for line in other.splitlines() if line.startswith("– ")]
    assert skipped == ["– [S6] and at most 55 input tokens in a call without it"], skipped
