"""notebook_runs.refuse, which the refusal tests use: a notebook run up to its setup cell in a kernel shared by the
test process. It must refuse exactly as papermill's full run refuses, and fail a test whose setup cell runs through."""

from __future__ import annotations

import papermill
import pytest
from notebook_runs import refuse, run

NAME = "03_sliding_window.ipynb"


def test_the_shared_kernel_refuses_as_papermill_does(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError) as shared:
        refuse(NAME, {"workspace": "refused_shared", "window_size": 5})
    with pytest.raises(papermill.PapermillExecutionError) as full:
        run(NAME, tmp_path, {"workspace": "refused_full", "window_size": 5})
    assert (shared.value.ename, shared.value.evalue) == (full.value.ename, full.value.evalue)
    assert "window_size must be an even number" in str(shared.value)
    assert not (workspace_root / "refused_shared").exists() and not (workspace_root / "refused_full").exists()


def test_a_setup_cell_that_runs_through_fails_the_test(workspace_root):
    with pytest.raises(pytest.fail.Exception, match="did not stop at its setup cell"):
        refuse(NAME, {"workspace": "accepted", "window_size": 4})


def test_each_run_starts_from_a_fresh_namespace_and_this_process_environment(workspace_root, monkeypatch):
    monkeypatch.setenv("WORKBOOK_BACKEND", "nova")  # the notebook's backend=None would read it; refuse passes offline
    with pytest.raises(papermill.PapermillExecutionError, match="Unknown model backend 'nova'"):
        refuse(NAME, {"workspace": "fresh", "backend": None})
    monkeypatch.delenv("WORKBOOK_BACKEND")
    with pytest.raises(papermill.PapermillExecutionError, match="window_size must be an even number"):
        refuse(NAME, {"workspace": "fresh", "window_size": 3})
