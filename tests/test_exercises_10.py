"""Notebook 10's exercises, replayed with their solutions: the notebook's checks must still pass."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "10_memory_you_can_trust.ipynb"


def run(tmp_path: Path, parameters: dict, notebook: nbformat.NotebookNode | None = None) -> str:
    source = NOTEBOOK
    if notebook is not None:
        source = tmp_path / "with_solution.ipynb"
        nbformat.write(notebook, source)
    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(source), str(output), parameters={"backend": "offline", **parameters}, kernel_name="python3",
        cwd=str(NOTEBOOK.parent), progress_bar=False, execution_timeout=300,
    )
    executed = nbformat.read(output, as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "All checks passed." in text
    return text


def only_own_workspace(workspace_root: Path, name: str) -> None:
    assert sorted(p.name for p in workspace_root.iterdir()) == [name], "it wrote only inside its own workspace"


def test_exercise_1_another_owner_and_attacker(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_10a", "owner": "lin", "attacker": "eve"})
    assert "said by 'eve', not by the memory's owner 'lin'" in text
    assert "attack success: 100% -> 0%; false refusals: 0.0% -> 6.7%" in text, "the same rates"
    only_own_workspace(workspace_root, "ex_10a")


def test_exercise_2_sensitive_facts_without_asking(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_10b", "confirm_sensitive": False})
    assert "interrupt from" not in text, "no confirmation is asked"
    audit = (workspace_root / "ex_10b" / "defended" / "audit.jsonl").read_text(encoding="utf-8")
    assert audit.count("ada@example.com") == 1 and '"action": "allow"' in audit
    assert "attack success: 100% -> 0%; false refusals: 0.0% -> 6.7%" in text, "the measured rates do not change"
    only_own_workspace(workspace_root, "ex_10b")


def test_exercises_3_and_4_solution_code_runs_in_the_notebook(tmp_path, workspace_root):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    solution = next(c.source for c in notebook.cells if c.cell_type == "markdown" and "<summary>Solution</summary>" in c.source)
    blocks = re.findall(r"```python\n(.*?)```", solution, re.DOTALL)
    assert len(blocks) == 2
    for code in blocks:
        notebook.cells.append(nbformat.v4.new_code_cell(code))
    text = run(tmp_path, {"workspace": "ex_10c"}, notebook)
    assert "stored: [] | refused: True" in text, "exercise 3: the owner said no, nothing was stored"
    assert "Your it phone number is +1 555 0177." in text, "exercise 4: stored and answered without the defence"
    only_own_workspace(workspace_root, "ex_10c")


def test_the_same_person_as_owner_and_attacker_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="owner and attacker must differ"):
        run(tmp_path, {"workspace": "ex_10d", "owner": "ada", "attacker": "ada"})
    assert not (workspace_root / "ex_10d").exists(), "nothing is created before the parameters are checked"
