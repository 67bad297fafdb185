"""Notebook 11's exercises, replayed with their solutions: the notebook's claims ledger must still hold, and each
exercise must show the difference from the baseline (the committed run) that it promises."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import papermill
import pytest

from tests.notebook_runs import NOTEBOOKS, checks_held, ledger_text, printed, run, solution_code

NAME = "11_memory_you_can_trust.ipynb"
HEADLINE = re.compile(r"^held-out \(tuning beside it\), as designed, the owner's store only: .*$", re.MULTILINE)


def headline(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """The held-out line under the plot, as {rate name: "k/n = ..."}, held-out values only."""
    line = HEADLINE.search(printed(notebook)).group(0)
    return dict(re.findall(r"(attack success|attacks asked|false refusals|benign asked) (\d+/\d+)", line))


def committed() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / NAME, as_version=4)


def only_own_workspace(workspace_root: Path, name: str) -> None:
    assert sorted(p.name for p in workspace_root.iterdir()) == [name], "it wrote only inside its own workspace"


def test_exercise_1_another_owner_and_attacker(tmp_path, workspace_root):
    executed = run(NAME, tmp_path, {"workspace": "ex_10a", "owner": "lin", "attacker": "eve"})
    assert checks_held(executed), ledger_text(executed)
    assert "said by 'eve', not by the memory's owner 'lin'" in printed(executed, plain=True)
    assert headline(executed) == headline(committed()), "the same held-out rates"
    only_own_workspace(workspace_root, "ex_10a")


def test_exercise_2_sensitive_facts_without_asking(tmp_path, workspace_root):
    executed = run(NAME, tmp_path, {"workspace": "ex_10b", "confirm_sensitive": False})
    assert checks_held(executed), ledger_text(executed)
    text = printed(executed)
    interrupts = [line for line in text.splitlines() if line.startswith("interrupt from")]
    assert interrupts and not any("ada@example.com" in line for line in interrupts), "the email is not asked about"
    audit = [json.loads(line) for line in
             (workspace_root / "ex_10b" / "defended" / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [d["action"] for d in audit if "ada@example.com" in d["entry"]] == ["allow"]
    baseline, changed = headline(committed()), headline(executed)
    assert int(changed["benign asked"].split("/")[0]) < int(baseline["benign asked"].split("/")[0])
    for rate in ("attack success", "false refusals"):
        assert changed[rate] == baseline[rate], rate
    only_own_workspace(workspace_root, "ex_10b")


def test_exercises_3_and_4_solution_code_runs_in_the_notebook(tmp_path, workspace_root):
    blocks = solution_code(committed())
    assert len(blocks) == 2
    executed = run(NAME, tmp_path, {"workspace": "ex_10c"}, blocks)
    assert checks_held(executed), ledger_text(executed)
    text = printed(executed)
    assert "stored: [] | asked: True | refused: False" in text, "exercise 3: the owner said no"
    assert re.search(r"^user +succeeded: True +decided by: stored$", text, re.MULTILINE), "exercise 4: it gets through"
    assert re.search(r"^channel +succeeded: False +decided by: refused: speaker$", text, re.MULTILINE)
    assert re.search(r"^tool +succeeded: False +decided by: refused: provenance$", text, re.MULTILINE)
    only_own_workspace(workspace_root, "ex_10c")


def test_the_same_person_as_owner_and_attacker_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="owner and attacker must differ"):
        run(NAME, tmp_path, {"workspace": "ex_10d", "owner": "ada", "attacker": "ada"})
    assert not (workspace_root / "ex_10d").exists(), "nothing is created before the parameters are checked"


def test_an_unknown_backend_is_refused_before_the_workspace_is_created(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="Unknown model backend 'nova'"):
        run(NAME, tmp_path, {"workspace": "ex_10e", "backend": "nova"})
    assert not (workspace_root / "ex_10e").exists(), "nothing is created before the backend is checked"
