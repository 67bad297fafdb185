"""The set-up stays honest: pins agree everywhere, and every notebook has the workbook's shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def pyproject_dependencies() -> list[str]:
    """The `dependencies = [...]` list of pyproject.toml (read by hand: tomllib is Python 3.11+)."""
    text = (REPO / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.MULTILINE | re.DOTALL).group(1)
    return re.findall(r'^\s+"([^"]+)",', block, re.MULTILINE)


def pyproject_pins() -> dict[str, str]:
    return dict(dep.split("==") for dep in pyproject_dependencies())


def environment_pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "environment.yml").read_text().splitlines():
        match = re.match(r"^\s+- ([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if match:
            pins[match.group(1)] = match.group(2)
    return pins


def test_every_dependency_is_pinned_exactly():
    assert len(pyproject_dependencies()) >= 9
    assert all("==" in dep for dep in pyproject_dependencies())
    assert pyproject_pins()["strands-agents"] == "1.62.0"


def test_environment_yml_matches_pyproject():
    assert environment_pins() == pyproject_pins()


def test_constraints_agree_with_the_pins():
    constraints = dict(
        line.split("==") for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line
    )
    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    lowered = {canonical(name): version for name, version in constraints.items()}
    for name, version in pyproject_pins().items():
        assert lowered[canonical(name)] == version, name


def test_ci_calls_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_shape(path):
    notebook = json.loads(path.read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "agent-memory"
    cells = notebook["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and tagged[0]["cell_type"] == "code"
    source = [("".join(c["source"]), c["cell_type"]) for c in cells]
    assert any("reset_workspace(workspace)" in s for s, kind in source if kind == "code")
    headings = "\n".join(s for s, kind in source if kind == "markdown")
    for heading in ["## Check yourself", "## Summary", "## Exercises", "## What's next", "**What you will learn**"]:
        assert heading in headings, heading
    outputs = "".join("".join(o.get("data", {}).get("text/plain", "")) for c in cells if c["cell_type"] == "code"
                      for o in c.get("outputs", []))
    assert re.search(r"\d+ of \d+ claims hold", outputs), "outputs are committed (the ledger included) so nbval compares them"
    assert not any("execution" in c["metadata"] for c in cells), "refresh with `make notebooks` (no run timestamps)"
