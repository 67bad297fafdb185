"""Notebook 12's exercises, replayed: the parameter changes of exercises 1 to 3 in one papermill run (their checks
hold together), the code of exercise 4 executed after it (its LockTimeout timed); a second endpoint refused while the
notebook's runs; and a bad parameter (or an S3 bucket or DynamoDB table name AWS would refuse) stops the notebook
before anything is created."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, solution_code

NAME = "12_sessions_at_scale.ipynb"


def run(tmp_path: Path, parameters: dict, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    return notebook_runs.run(NAME, tmp_path, parameters, extra_cells)


def printed(notebook: nbformat.NotebookNode) -> str:
    return notebook_runs.printed(notebook, plain=True)


def test_exercises_1_to_4(tmp_path, workspace_root):
    (lock_code,) = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    result = run(tmp_path, {"workspace": "ex_11a", "users": 80, "turns": 3, "writers": 3, "workers": 1}, [
        "assert (back.sessions, back.messages, back.foreign_tags) == (80, 480, 0)",
        "assert [row['turns lost'] for row in lost_rows] == [2, 0] and lost_rows[0]['writer prompts in S3'] == 1",
        "assert lost_rows[0]['messages in S3'] == 2 + 2  # the seeded turn, and two of the six new messages",
        lock_code,
    ])
    text = printed(result)
    assert checks_held(result)
    assert "PutObject: 720 = 2 per turn x 240 turns + 240" in text
    assert "in the order they got the lock: [2, 4, 6]" in text
    timed = re.search(r"LockTimeout after (\d+\.\d) s: writer-b: the lock locks/stuck.lock was still held after 1 s", text)
    assert timed, text[-2000:]
    assert 1.0 <= float(timed.group(1)) < 2.5, "about a second: the 1 s wait, not the default 30 s"


def test_exercise_4_is_refused_while_the_notebooks_endpoint_runs(tmp_path, workspace_root):
    """Pasted before Check yourself (the notebook's endpoint still running), the solution stops with a clear message
    instead of starting a second endpoint, which would empty the notebook's bucket."""
    (lock_code,) = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    notebook = nbformat.read(NOTEBOOKS / NAME, as_version=4)
    check = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "markdown" and c.source.startswith("## Check yourself"))
    notebook.cells = notebook.cells[:check]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in (
        "from companion.sessions.local_aws import EndpointError\n"
        "try:\n" + "".join("    " + line + "\n" for line in lock_code.splitlines()) +
        "except EndpointError as error:\n    print('refused:', error)",
        "print('objects still in the bucket:', len(objects_with_sizes(s3, bucket)))",
    )]
    source = tmp_path / ("cut_" + NAME)
    nbformat.write(notebook, source)
    papermill.execute_notebook(str(source), str(tmp_path / NAME), parameters={"backend": "offline", "workspace": "ex_11c",
                               "users": 3, "turns": 2}, kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False,
                               execution_timeout=300)
    text = printed(nbformat.read(tmp_path / NAME, as_version=4))
    assert "refused: a local endpoint is already running in this process at http://127.0.0.1:" in text
    kept = int(re.search(r"objects still in the bucket: (\d+)", text).group(1))
    assert kept >= 2 * 3 * 2, "the notebook's sessions are still there"


@pytest.mark.parametrize(("parameters", "message"), [
    ({"endpoint": "aws"}, "bucket must be a name of your own"),
    ({"bucket": "Bad_Bucket/../x"}, "bucket must be an S3 bucket name"),
    ({"memory_table": "t!"}, "memory_table must be a DynamoDB table name"),
])
def test_a_bad_parameter_stops_before_anything_is_created(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=re.escape(message)):
        run(tmp_path, {"workspace": "ex_11b", **parameters})
    assert not (workspace_root / "ex_11b").exists()
