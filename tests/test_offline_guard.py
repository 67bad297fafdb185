"""The test command runs offline whatever the shell says: no Bedrock calls, no paid calls, no telemetry."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO


def test_this_run_is_offline():
    """Holds in every test process: tests/conftest.py forces the offline backend before any test or kernel starts."""
    assert os.environ.get("WORKBOOK_BACKEND") == "offline"
    assert os.environ.get("ORT_DISABLE_TELEMETRY") == "1"


def test_a_shell_asking_for_bedrock_still_gets_offline(tmp_path):
    env = dict(
        os.environ,
        WORKBOOK_BACKEND="bedrock",
        AWS_ACCESS_KEY_ID="AKIAEXAMPLEEXAMPLE",
        AWS_SECRET_ACCESS_KEY="not-a-real-secret",
        ORT_DISABLE_TELEMETRY="0",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_offline_guard.py::test_this_run_is_offline", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_make_test_sets_the_offline_environment():
    """`make test` names the backend on the test command itself, so a shell's WORKBOOK_BACKEND cannot reach it."""
    env = dict(os.environ, WORKBOOK_BACKEND="bedrock")
    done = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "test"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    (command,) = [line for line in done.stdout.splitlines() if "pytest" in line]
    assert "WORKBOOK_BACKEND=offline" in command and "ORT_DISABLE_TELEMETRY=1" in command, command
