"""Papermill runs that must stop before anything is written: unsafe workspace and session ids, a refused value.

Every notebook's run with other parameters than its defaults is the class replay's (tests/test_replay.py: the sample
class file's parameters, on the local Bedrock path, in the second voice): one execution per notebook, not two."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def replay(name: str, tmp_path: Path, parameters: dict) -> nbformat.NotebookNode:
    output = tmp_path / name
    papermill.execute_notebook(
        str(NOTEBOOKS / name),
        str(output),
        parameters={"backend": "offline", **parameters},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
        execution_timeout=300,  # a hung cell fails the test instead of the whole CI run
    )
    return nbformat.read(output, as_version=4)


def test_unsafe_workspace_parameter_stops_the_replay(tmp_path, workspace_root):
    outside = workspace_root.parent / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    with pytest.raises(papermill.PapermillExecutionError, match="UnsafePathError"):
        replay("00_orientation.ipynb", tmp_path, {"workspace": "../precious"})
    assert (outside / "keep.txt").read_text() == "keep"


def test_unsafe_session_id_parameter_stops_the_replay(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="Unsafe session id"):
        replay("01_restart_test.ipynb", tmp_path, {"workspace": "pm_bad", "session_id": "../../escape"})
    assert not (workspace_root.parent / "escape").exists()


def test_odd_window_is_refused_with_a_reason(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="window_size must be an even number"):
        replay("03_sliding_window.ipynb", tmp_path, {"workspace": "pm_odd", "window_size": 5})


def test_unknown_backend_parameter_lists_the_choices(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="Choose one of: offline, bedrock"):
        replay("02_agent_json_anatomy.ipynb", tmp_path, {"backend": "gpt-9"})
