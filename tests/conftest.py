"""Shared fixtures: a throw-away workspace root, so tests never write into the repository's workspace/."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# The offline environment (WORKBOOK_BACKEND=offline and the rest) is set by the repository's root conftest.py, which
# pytest loads for every collection, notebooks/ alone included.


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
