"""Shared fixtures: a throw-away workspace root, so tests never write into the repository's workspace/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Tests always run offline, whatever the shell exports: no Bedrock calls (paid, or hanging without credentials), and
# no onnxruntime telemetry. Set here, before any test, kernel (nbval, papermill) or subprocess starts, so all inherit it.
os.environ["WORKBOOK_BACKEND"] = "offline"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"


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
