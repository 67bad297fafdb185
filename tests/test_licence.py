"""The workbook may be reused: a licence for the code and one for the prose and figures, stated where a reader meets
them (README, each notebook's metadata, the package metadata)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb")) + [REPO / "templates" / "notebook.ipynb"]
EXPECTED = {"code": "Apache-2.0", "prose and figures": "CC-BY-4.0"}


def test_licence_files_and_readme():
    assert "Apache License" in (REPO / "LICENSE").read_text()[:200]
    assert "Version 2.0" in (REPO / "LICENSE").read_text()[:200]
    content = (REPO / "LICENSE-CONTENT.md").read_text()
    assert "CC BY 4.0" in content and "creativecommons.org/licenses/by/4.0" in content
    readme = (REPO / "README.md").read_text()
    assert "## Licence" in readme and "Apache License 2.0" in readme and "CC BY 4.0" in readme
    assert "Apache-2.0" in (REPO / "pyproject.toml").read_text()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_states_its_licence(path):
    metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    assert metadata.get("license") == EXPECTED, f"{path.name}: metadata.license should be {EXPECTED}"
