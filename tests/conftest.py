"""Shared fixtures: a throw-away workspace root, so tests never write into the repository's workspace/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Tests always run offline, whatever the shell exports: no Bedrock calls (paid, or hanging without credentials), and
# no onnxruntime telemetry, and no probe of the EC2 instance-metadata address (169.254.169.254) when botocore looks for
# credentials that a test machine does not have. Set here, before any test, kernel (nbval, papermill) or subprocess
# starts, so all inherit it.
os.environ["WORKBOOK_BACKEND"] = "offline"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


@pytest.fixture
def workspace_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("WORKBOOK_WORKSPACE_ROOT", str(root))
    return root.resolve()


def user(text: str) -> dict:
    return {"role": "user", "content": [{"text": text}]}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": [{"text": text}]}


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    """A machine with no AWS configuration at all, as at a workshop without an account."""
    for name in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "WORKBOOK_BACKEND",
        "WORKBOOK_MODEL_ID",
    ]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


@pytest.fixture
def fake_aws(no_aws, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")


def pytest_terminal_summary(terminalreporter):
    """Print where tests/test_browser.py saved its screenshots (one per notebook), also when it ran on an xdist worker."""
    reports = terminalreporter.getreports("passed") + terminalreporter.getreports("failed")
    folders = sorted({value for report in reports for name, value in report.user_properties if name == "browser screenshots"})
    for folder in folders:
        terminalreporter.write_line(f"browser test screenshots: {folder}")
