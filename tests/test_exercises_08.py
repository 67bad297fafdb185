"""Notebook 08's exercises, replayed with their solutions: each shows what the exercise says to see, and the claims
ledger of "Check yourself" still holds."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import nbformat
import papermill
import pytest
from notebook_runs import checks_held, ledger_text, printed, run, solution_code

NAME = "08_what_to_remember.ipynb"
NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / NAME
PYTHON = "The user's programming language is Python."
GO = "The user's programming language is Go."


def only_own_workspace(workspace_root: Path, name: str) -> None:
    assert sorted(p.name for p in workspace_root.iterdir()) == [name], "it wrote only inside its own workspace"


def test_exercise_1_longer_conversation(tmp_path, workspace_root):
    notebook = run(NAME, tmp_path, {"workspace": "ex_08a", "turns": 60})
    text = printed(notebook)
    assert checks_held(notebook)
    assert "60 turns for ada" in text
    assert re.search(r"dump every message\s+60 turn calls,\s+0 extraction calls,\s+120 memories stored", text)
    assert re.search(r"extraction\s+60 turn calls,\s+60 extraction calls,\s+8 memories stored", text)
    ratio = float(re.search(r"dumping stored ([\d.]+) times as many memories", text).group(1))
    assert ratio == 120 / 8, "the dump grows with the conversation, extraction does not (7.5 at 30 turns)"
    only_own_workspace(workspace_root, "ex_08a")


def test_exercise_2_another_pair_of_users(tmp_path, workspace_root):
    notebook = run(NAME, tmp_path, {"workspace": "ex_08b", "user_a": "lin", "user_b": "sam"})
    shown = printed(notebook, plain=True)  # the tables' text/plain too
    ledger = ledger_text(notebook)
    assert checks_held(notebook)
    assert "30 turns for lin, 5 for sam" in shown and "sam, scoped, on what sam stated:" in shown
    for table_name in ("lin, scoped", "lin, no scope", "sam's memories injected without scope"):
        assert table_name in shown, f"the scope table is headed {table_name!r}"
    assert "facts-about-lin.md" in shown and "# Facts about lin" in shown and "# History of lin" in shown
    assert "without the scope, sam's memories are returned to lin" in ledger
    assert "scopes ['lin', 'sam'], foreign hits []" in ledger, "the scope rows hold over every search"
    assert not re.search(r"\b(ada|grace)\b", shown + ledger), "no output mentions the default users"
    only_own_workspace(workspace_root, "ex_08b")


def test_exercise_3_longer_time_to_live(tmp_path, workspace_root):
    notebook = run(NAME, tmp_path, {"workspace": "ex_08c", "ttl_days": 30})
    text = printed(notebook)
    assert checks_held(notebook)
    written, until = re.search(r"written (\S+) \| valid until (\S+)", text).groups()
    assert datetime.fromisoformat(until) - datetime.fromisoformat(written) == timedelta(days=30)
    (before, answer_before), (after, answer_after) = re.findall(r"^at (\S+): (.*)$", text, re.MULTILINE)
    assert datetime.fromisoformat(after) - datetime.fromisoformat(before) == timedelta(days=31)
    assert answer_before == "Your desk this week is B-12." and "B-12" not in answer_after
    only_own_workspace(workspace_root, "ex_08c")


def exercise_4_lines(text: str) -> tuple[str, str, str]:
    plain = re.search(r"^plain 'save immediately' injected: (.*)$", text, re.MULTILINE).group(1)
    selective = re.search(r"^with supersede=True injected: (.*)$", text, re.MULTILINE).group(1)
    counts = re.search(r"^current memories: (.*)$", text, re.MULTILINE).group(1)
    return plain, selective, counts


def test_exercise_4_supersede_injects_only_the_current_value(tmp_path, workspace_root):
    (code,) = solution_code(nbformat.read(NOTEBOOK, as_version=4))
    notebook = run(NAME, tmp_path, {"workspace": "ex_08d"}, [code])
    plain, selective, counts = exercise_4_lines(printed(notebook))
    assert checks_held(notebook)
    assert PYTHON in plain and GO in plain, "the plain store injects the contradictory pair"
    assert selective == f'["{GO}"] -> Your programming language is Go.', "the superseding store injects only Go"
    assert counts == f'5 plain, 4 here; history here: ["{PYTHON}"]', "one memory fewer: Python kept as history"
    only_own_workspace(workspace_root, "ex_08d")


def test_exercise_4_pasted_before_the_checks_leaves_them_holding(tmp_path, workspace_root):
    """A learner who puts the cell above "Check yourself" (and Runs All) must not break the ledger."""
    (code,) = solution_code(nbformat.read(NOTEBOOK, as_version=4))
    source = nbformat.read(NOTEBOOK, as_version=4)
    at = next(i for i, c in enumerate(source.cells) if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    source.cells.insert(at, nbformat.v4.new_code_cell(code))
    nbformat.write(source, tmp_path / "before_checks.ipynb")
    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(tmp_path / "before_checks.ipynb"), str(output), parameters={"backend": "offline", "workspace": "ex_08f"},
        kernel_name="python3", cwd=str(NOTEBOOK.parent), progress_bar=False, execution_timeout=300,
    )
    executed = nbformat.read(output, as_version=4)
    assert checks_held(executed)
    assert exercise_4_lines(printed(executed))[1].startswith(f'["{GO}"]')
    only_own_workspace(workspace_root, "ex_08f")


def test_the_same_user_twice_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="user_a and user_b must differ"):
        run(NAME, tmp_path, {"workspace": "ex_08e", "user_a": "ada", "user_b": "ada"})
