"""The restart test runner: two real processes that share only the session directory."""

from __future__ import annotations

import os

import pytest

from companion.sessions import restart_runner
from companion.sessions.restart_runner import DEFAULT_PLANT, DEFAULT_RECALL, PhaseFailed, run_phase
from companion.sessions.session_files import files_with_sizes, message_files
from companion.support.workspace import UnsafePathError


def test_plant_then_recall_in_two_processes(workspace_root):
    storage = workspace_root / "restart" / "sessions"
    plant = run_phase(DEFAULT_PLANT, backend="offline", session_id="demo", storage_dir=storage)
    recall = run_phase(DEFAULT_RECALL, backend="offline", session_id="demo", storage_dir=storage)
    assert plant.pid != recall.pid and os.getpid() not in {plant.pid, recall.pid}
    assert plant.stdout.splitlines() == [
        "messages restored: 0",
        "reply: Noted: your name is Pin and your favorite number is 42.",
        "messages now: 2",
    ]
    assert recall.stdout.splitlines() == [
        "messages restored: 2",
        "reply: Your name is Pin and your favorite number is 42.",
        "messages now: 4",
    ]
    assert len(message_files(storage, "demo")) == 4


def test_no_session_manager_writes_nothing(workspace_root):
    storage = workspace_root / "bare"
    run_phase(DEFAULT_PLANT, backend="offline", session_id=None, storage_dir=storage)
    recall = run_phase(DEFAULT_RECALL, backend="offline", session_id=None, storage_dir=storage)
    assert "I cannot see your name or your favorite number" in recall.stdout
    assert files_with_sizes(storage) == {}


def test_storage_outside_the_workspace_is_refused(workspace_root, tmp_path):
    with pytest.raises(UnsafePathError):
        run_phase(DEFAULT_PLANT, backend="offline", session_id="demo", storage_dir=tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


def test_unsafe_session_id_is_refused_before_any_process(workspace_root, monkeypatch):
    started = []

    class Started(Exception):
        pass

    def popen(*args, **kwargs):
        started.append(args)
        raise Started

    monkeypatch.setattr(restart_runner.subprocess, "Popen", popen)
    for bad in ["../x", "a/b", "x\ny", ".."]:
        with pytest.raises(UnsafePathError):
            run_phase(DEFAULT_PLANT, backend="offline", session_id=bad, storage_dir=workspace_root / "s")
    with pytest.raises(ValueError):
        run_phase(DEFAULT_PLANT, backend="offline", session_id="demo", storage_dir=workspace_root / "s", window_size="many")
    assert started == [], "no phase process was started"
    assert list(workspace_root.iterdir()) == [], "nothing was written: not even the storage folder"
    with pytest.raises(Started):  # the control: a valid call does reach the process start this test watches
        run_phase(DEFAULT_PLANT, backend="offline", session_id="demo", storage_dir=workspace_root / "s")
    assert len(started) == 1


def test_a_failing_phase_reports_its_error(workspace_root, monkeypatch, tmp_path):
    for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with pytest.raises(PhaseFailed, match="BackendError: The bedrock backend needs AWS credentials"):
        run_phase(DEFAULT_PLANT, backend="bedrock", session_id="demo", storage_dir=workspace_root / "s")
