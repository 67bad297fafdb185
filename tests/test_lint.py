"""ruff over the package, tests, tools, benchmarks and notebooks, with the settings in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_notebook_code_lines_fit_the_pane():
    """Notebook code lines are at most 88 characters (ruff's default), which the book shows whole at 1280 px and
    JupyterLab with the file browser open (the package itself keeps ruff's wider limit from pyproject.toml)."""
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run(
        [str(ruff), "check", "--no-cache", "--select", "E501", "--line-length", "88", "notebooks", "templates"],
        cwd=REPO, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
