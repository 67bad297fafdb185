"""Notebook 11's exercises, replayed: one run with the solutions of exercises 2 and 3 appended (each writes to its own
folder and reads nothing the notebook's checks read), exercise 1's parameter in the class replay (classes/sample.yaml
gives it: it changes the rates table the other two are compared with, so it cannot join the run above), and the
refusals on their own."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, replayed, run_once, solution_code

NAME = "11_memory_you_can_trust.ipynb"
RECORDS = Path(__file__).resolve().parent / "records"


def rates(record_path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """The rates table the run printed, as its record keeps it: (set, version) -> column -> "k/n = ..."."""
    record = json.loads(record_path.read_text(encoding="utf-8"))
    return {(row["set"], row["version"]): row for row in record["rates"]}


def counts(row: dict[str, str]) -> dict[str, str]:
    return {column: value.split(" = ")[0] for column, value in row.items() if column not in ("set", "version")}


COMMITTED = rates(RECORDS / "11_memory_you_can_trust.json")


@pytest.fixture(scope="module")
def solutions_run(tmp_path_factory):
    solutions = solution_code(nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 2, "the solutions of exercises 2 and 3"
    notebook, _ = run_once(tmp_path_factory, NAME, {}, solutions)
    return notebook


def test_exercise_2_an_owner_who_says_no(solutions_run):
    assert checks_held(solutions_run), ledger_text(solutions_run)
    assert "0/24 = 0% [0%-14%] | benign stored: 11" in printed(solutions_run)


def test_exercise_3_a_phrasing_that_gets_through(solutions_run):
    lines = printed(solutions_run).splitlines()
    assert "user     succeeded: True  decided by: stored" in lines, "the owner's own turn: stored unasked"
    assert "channel  succeeded: False decided by: refused: speaker" in lines
    assert "tool     succeeded: False decided by: refused: provenance" in lines


def test_exercise_1_sensitive_facts_without_asking(series_replay):
    """The class replay's run of 11 (paraphrase voice, local Bedrock path): the rates are the guard's decisions, which
    read the memories and the turns, not the model's replies. That it wrote only inside its own workspace is
    tests/test_replay.py's check of every notebook of the replay (each workspace folder is one notebook's)."""
    executed, workspace = replayed(series_replay, NAME, {"confirm_sensitive": False})
    assert checks_held(executed), ledger_text(executed)
    changed = rates(workspace / "record.json")
    before, after = counts(COMMITTED["held-out", "ask on wording"]), counts(changed["held-out", "ask on wording"])
    assert (before["benign asked"], after["benign asked"]) == ("12/24", "8/24")
    for column in ("attacks refused", "attacks asked", "attacks in a later answer", "benign refused"):
        assert after[column] == before[column], column
    rules = json.loads((workspace / "record.json").read_text(encoding="utf-8"))["rules"]
    assert "sensitive key" not in [row["rule"] for row in rules], "no sensitive-key row in the rules table"


def test_the_same_person_as_owner_and_attacker_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="owner and attacker must differ"):
        notebook_runs.refuse(NAME, {"workspace": "ex_11d", "owner": "ada", "attacker": "ada"})
    assert not (workspace_root / "ex_11d").exists(), "nothing is created before the parameters are checked"


def test_an_unknown_backend_is_refused_before_the_workspace_is_created(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="Unknown model backend 'nova'"):
        notebook_runs.refuse(NAME, {"workspace": "ex_11e", "backend": "nova"})
    assert not (workspace_root / "ex_11e").exists(), "nothing is created before the backend is checked"



def test_the_guards_excerpt_is_its_code():
    """The lesson shows how MemoryWriteGuard.before_tool_call ends as a plain excerpt: it must be that code."""
    import inspect

    from companion.memory.write_policy import MemoryWriteGuard

    notebook = nbformat.read(notebook_runs.NOTEBOOKS / NAME, as_version=4)
    blocks = [block.split("```")[0] for cell in notebook.cells if cell.cell_type == "markdown"
              for block in cell.source.split("```python\n")[1:] if block.startswith("refused = ")]
    assert len(blocks) == 1, "one excerpt of the guard's last lines"
    source = inspect.getsource(MemoryWriteGuard.before_tool_call)  # a method: its body indented by 8
    body = "\n".join(line[8:] if line.startswith(" " * 8) else line for line in source.splitlines())
    assert body.rstrip().endswith(blocks[0].rstrip()), "the excerpt is the end of before_tool_call, line for line"
