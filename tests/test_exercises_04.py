"""Notebook 04's exercises, replayed: each solution's code runs after the notebook with the notebook's checks still
passing; bad parameters stop it with a reason; the smallest accepted values keep the checks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, printed, solution_code

NAME = "04_state_manifest.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells)


def test_code_exercises_1_to_3(tmp_path, workspace_root):
    plan, append, note = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    text = printed(run(tmp_path, {"workspace": "ex_04a"}, [
        plan + "\nassert 'pro' in str(agent.messages[-1])",
        # appending: one manifest per invocation, a surcharge that grows every turn, and the answer still right
        append + "\nassert appending_agent.system_prompt.count('<manifest>') == turns\n"
                 "growth = [r['input tokens'] - p['input tokens'] for r, p in zip(appending, plain)]\n"
                 "assert all(b > a for a, b in zip(growth, growth[1:])), growth\n"
                 "assert growth[-1] >= turns * manifest_tokens - turns, growth\n"
                 "assert codename in appending[-1]['reply'], appending[-1]['reply']",
        note + "\nnow = math.ceil(len(agent.system_prompt) / 4) - math.ceil(len(base_prompt) / 4)\n"
               "assert 500 < now < 540, now\n"
               "assert codename in str(result)",
    ]))
    assert "All checks passed." in text
    assert "Your plan is pro." in text


@pytest.mark.parametrize("window_size, turns", [(2, 2), (2, 4)])
def test_smallest_accepted_values_keep_the_checks(tmp_path, workspace_root, window_size, turns):
    text = printed(run(tmp_path, {"workspace": f"ex_04_{window_size}_{turns}", "window_size": window_size, "turns": turns}))
    assert "All checks passed." in text


def test_odd_window_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="window_size must be an even number"):
        run(tmp_path, {"workspace": "ex_04b", "window_size": 3})
