"""Notebook 12's exercises, replayed: one run with exercise 1's parameter (three writers; 20 users x 3 turns keep the
run short) and the solutions of exercises 2 to 4 appended after "Check yourself" (they write after the checks have
read the bucket: a copy of user 0's first prompt into user 1's session, a lock at `stuck/`, or to a bucket that does
not exist); and a bad parameter (or an S3 bucket or DynamoDB table name AWS would refuse), which stops the notebook before
anything is created."""

from __future__ import annotations

import re

import nbformat
import notebook_runs
import papermill
import pytest
from notebook_runs import NOTEBOOKS, checks_held, ledger_text, run_once, solution_code

NAME = "12_sessions_at_scale.ipynb"


@pytest.fixture(scope="module")
def exercises_run(tmp_path_factory):
    solutions = solution_code(nbformat.read(NOTEBOOKS / NAME, as_version=4))
    assert len(solutions) == 3, "the solutions of exercises 2, 3 and 4"
    notebook, _ = run_once(tmp_path_factory, NAME, {"users": 20, "turns": 3, "writers": 3}, solutions)
    return notebook


def shown(notebook: nbformat.NotebookNode) -> str:
    """What the run printed, tables' text forms included, with runs of spaces made one."""
    return re.sub(r" +", " ", notebook_runs.printed(notebook, plain=True))


def test_the_checks_hold_after_the_exercises(exercises_run):
    assert checks_held(exercises_run), ledger_text(exercises_run)


def test_exercise_1_three_writers(exercises_run):
    text = shown(exercises_run)
    # session, messages seeded, each writer restored, messages the writers wrote, messages in S3, writer prompts in
    # S3, turns lost, writers that got 412
    assert "no-lock 2 [2, 2, 2] 6 4 1 of 3 2 0" in text, "1 of 3 prompts without the lock: 4 in S3, the writers wrote 6"
    assert "with-lock 2 [2, 4, 6] 6 8 3 of 3 0 2" in text, "with the lock the writers restore 2, 4 and 6; 2 waited on 412"
    assert ("the writers' PutObject calls: agent.json 3, message_2.json 3, message_3.json 3; all 9 succeeded"
            in text), "each writer wrote messages 2 and 3 and agent.json, and no writer got an error"


def test_exercise_2_a_message_in_the_wrong_session(exercises_run):
    assert "other users' tickets: 1; own prompts missing: 0" in notebook_runs.printed(exercises_run)


def test_two_users_on_one_session_id_on_the_lesson_path(exercises_run):
    text = notebook_runs.printed(exercises_run)
    assert "user 900: My ticket for today is U900T00." in text
    assert "user 901, same session id: Your ticket for today is U900T00." in text


def test_exercise_3_a_lock_never_released(exercises_run):
    text = notebook_runs.printed(exercises_run)
    timed = re.search(r"LockTimeout after (\d+\.\d) s: writer-2: the lock stuck/session.lock was still held after 1 s",
                      text)
    assert timed, text[-2000:]
    assert 1.0 <= float(timed.group(1)) < 2.5, "about a second: the 1 s wait, not the default 30 s"


def test_exercise_4_a_bucket_that_does_not_exist(exercises_run):
    text = notebook_runs.printed(exercises_run)
    assert ("SessionException: S3 error reading session_failure-demo/session.json: An error occurred (NoSuchBucket) "
            "when calling the GetObject operation") in text, text[-2000:]


@pytest.mark.parametrize(("parameters", "message"), [
    ({"endpoint": "aws"}, "bucket must be a name of your own"),
    ({"bucket": "Bad_Bucket/../x"}, "bucket must be an S3 bucket name"),
    ({"memory_table": "t!"}, "memory_table must be a DynamoDB table name"),
    ({"writers": 5}, "writers must be"),
    ({"users": 1}, "users must be"),
])
def test_a_bad_parameter_stops_before_anything_is_created(tmp_path, workspace_root, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=re.escape(message)):
        notebook_runs.refuse(NAME, {"workspace": "ex_12b", **parameters})
    assert not (workspace_root / "ex_12b").exists()
