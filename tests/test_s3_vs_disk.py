"""Notebook 12's S3-vs-disk check compares every field but the ones that legitimately differ (issue 23): a reply whose
usage was changed in S3 fails the ledger, while a reply that gained timeToFirstByteMs (what the SDK adds when it
measured 1 ms or more to the first chunk, on a busy machine) still holds."""

from __future__ import annotations

import nbformat
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text

NAME = "12_sessions_at_scale.ipynb"
KEY = "session_restart-demo/agents/agent_default/messages/message_1.json"


def tamper(change: str) -> str:
    """A cell, run just before Check yourself, that rewrites the first reply's object in S3."""
    return ("import json\n"
            f"_key = {KEY!r}\n"
            "_data = json.loads(s3.get_object(Bucket=bucket, Key=_key)['Body'].read())\n"
            f"{change}\n"
            "s3.put_object(Bucket=bucket, Key=_key, Body=json.dumps(_data, indent=2).encode())")


def run_with(tmp_path, change: str, workspace: str, notebook: nbformat.NotebookNode | None = None):
    notebook = notebook or nbformat.read(NOTEBOOKS / NAME, as_version=4)
    check = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    notebook.cells.insert(check, nbformat.v4.new_code_cell(tamper(change)))
    source, output = tmp_path / ("in_" + NAME), tmp_path / NAME
    nbformat.write(notebook, source)
    parameters = {"backend": "offline", "workspace": workspace, "users": 3, "turns": 2}
    papermill.execute_notebook(str(source), str(output), parameters=parameters, kernel_name="python3", cwd=str(NOTEBOOKS),
                               progress_bar=False, execution_timeout=300)
    return nbformat.read(output, as_version=4)


def test_a_reply_that_gained_time_to_first_byte_still_matches(tmp_path, workspace_root):
    result = run_with(tmp_path, "_data['message']['metadata']['metrics']['timeToFirstByteMs'] = 7", "s3disk_a")
    assert checks_held(result)
    assert "the replies too, timing aside" in ledger_text(result), "the row that compares the replies ran and held"


def test_a_reply_changed_in_any_other_field_fails_the_ledger(tmp_path, workspace_root):
    with pytest.raises(papermill.PapermillExecutionError, match="the replies too, timing aside"):
        run_with(tmp_path, "_data['message']['metadata']['usage']['outputTokens'] += 1", "s3disk_b")
