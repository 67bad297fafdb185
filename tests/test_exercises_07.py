"""Notebook 07's exercises replayed with their solutions: each must show what the exercise promises, checks passing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import papermill

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAME = "07_cost_of_remembering.ipynb"


def run(tmp_path: Path, parameters: dict, notebook: nbformat.NotebookNode | None = None) -> str:
    """Execute notebook 07 (or a changed copy of it) with papermill; return everything it printed or displayed."""
    source = NOTEBOOKS / NAME
    if notebook is not None:
        source = tmp_path / f"changed_{NAME}"
        nbformat.write(notebook, source)
    output = tmp_path / NAME
    papermill.execute_notebook(
        str(source),
        str(output),
        parameters={"backend": "offline", **parameters},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
        execution_timeout=300,
    )
    text = printed(nbformat.read(output, as_version=4))
    assert "All checks passed." in text
    return text


def printed(notebook: nbformat.NotebookNode) -> str:
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            parts.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def total_tokens(text: str, strategy: str) -> int:
    """A strategy's all-tokens total from the 'Reading the table' lines."""
    match = re.search(rf"^{re.escape(strategy)}\s+([\d,]+) tokens", text, re.MULTILINE)
    assert match, f"no total printed for {strategy}"
    return int(match.group(1).replace(",", ""))


def table_row(text: str, strategy: str) -> list[str]:
    """The cells of one row of a displayed table (its text form), after the strategy name."""
    match = re.search(rf"^{re.escape(strategy)}\s+(.*)$", text, re.MULTILINE)
    assert match, f"no row for {strategy}"
    return match.group(1).split()


def committed_text() -> str:
    return printed(nbformat.read(NOTEBOOKS / NAME, as_version=4))


def test_exercise_1_doubling_the_conversation_about_quadruples_the_bill(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_07a", "turns": 60})
    ratio = total_tokens(text, "no pruning") / total_tokens(committed_text(), "no pruning")
    assert 3.5 < ratio < 4.5, ratio
    print(f"ex1: ratio {ratio:.2f}")
    assert (workspace_root / "ex_07a").is_dir()


def test_exercise_2_a_window_of_58_keeps_every_fact_at_no_pruning_cost(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_07b", "window_size": 58})
    window, everything = table_row(text, "sliding window (58)"), table_row(text, "no pruning")
    assert window[-1] == "3/3", "the window still holds turn 1 when the question comes"
    assert window[0] == everything[0], "and its last turn costs as much as keeping everything"
    assert total_tokens(text, "sliding window (58)") == total_tokens(text, "no pruning")


def test_exercise_3_a_larger_budget_summarizes_less_and_pays_off_earlier(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_07c", "token_budget": 400})
    default = committed_text()
    calls = lambda t: int(table_row(t, "summarizing manager")[-5])  # noqa: E731 - the summary calls column
    assert calls(text) < calls(default)
    print(f"ex3: summary calls {calls(text)} instead of {calls(default)}")
    payoff = lambda t: int(re.search(r"^summarizing manager\s+(\d+)", t.split("the longer run")[1], re.MULTILINE).group(1))  # noqa: E731
    assert payoff(text) < payoff(default), "it pays off earlier"
    assert re.search(r"^prune\(\): summarize\s+not in 80", text.split("the longer run")[1], re.MULTILINE)


def test_exercise_4_persisting_the_summary_pays_off(tmp_path, workspace_root):
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    solution = next(c.source for c in notebook.cells if c.cell_type == "markdown" and "<summary>Solution" in c.source)
    code = re.search(r"```python\n(.*?)```", solution, re.DOTALL).group(1)
    after = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and "payoffs = table(" in c.source)
    notebook.cells.insert(after + 1, nbformat.v4.new_code_cell(code))
    text = run(tmp_path, {"workspace": "ex_07d"}, notebook)
    fewer = re.search(r"summary calls: (\d+) instead of (\d+)", text)
    assert fewer and int(fewer.group(1)) < int(fewer.group(2)) / 2
    assert re.search(r"persisting the summary pays off from turn \d+$", text, re.MULTILINE)
    stored = json.loads((workspace_root / "ex_07d" / "hand-built-persisting" / "session_cost-demo" / "messages.json").read_text())
    stored = stored["messages"] if isinstance(stored, dict) else stored
    users = [json.dumps(m["content"], sort_keys=True) for m in stored if m["role"] == "user"]
    assert all(a != b for a, b in zip(users, users[1:])), "no exchange is stored twice (consecutive prompts differ)"
    assert stored[-1]["role"] == "assistant"
    print("ex4:", fewer.group(0), re.search(r"pays off from turn \d+", text.split("persisting the summary")[1]).group(0), len(stored))


def test_smallest_window_keeps_the_checks(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_07w", "window_size": 2, "turns": 10, "payoff_turns": 40})
    assert table_row(text, "sliding window (2)")[-1] == "0/3"


def test_parameters_outside_the_lesson_stop_with_a_reason(tmp_path, workspace_root):
    import pytest

    for parameters, message in [
        ({"window_size": 5}, "window_size must be an even number of 2 or more"),
        ({"turns": 300}, "turns must be a whole number from 8 to 200"),
        ({"turns": 60, "payoff_turns": 40}, "payoff_turns must be a whole number from 60 to 200"),
        ({"summary_ratio": 0.95}, "summary_ratio must be a number in"),
    ]:
        with pytest.raises(papermill.PapermillExecutionError, match=message):
            run(tmp_path, {"workspace": "ex_07x", **parameters})


def test_exercise_5_auto_pays_off_in_a_longer_run(tmp_path, workspace_root):
    text = run(tmp_path, {"workspace": "ex_07e", "payoff_turns": 150})
    longer = text.split("the longer run")[1]
    assert re.search(r'^context_manager="auto"\s+\d+\s', longer, re.MULTILINE), "auto gets a payoff turn"
    assert re.search(r'^context_manager="agentic"\s+not in 150', longer, re.MULTILINE), "agentic does not"
    print("ex5:", *(line for line in longer.splitlines() if line.startswith(("no pruning", "context_manager="))), sep="\n")
