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


def environment_pip_lines() -> list[str]:
    """The entries of environment.yml's `pip:` section."""
    text = (REPO / "environment.yml").read_text()
    block = text[text.index("  - pip:"):]
    return [m.group(1).strip() for m in re.finditer(r"^\s{6}- (.+)$", block, re.MULTILINE)]


def test_every_dependency_is_pinned_exactly():
    assert len(pyproject_dependencies()) >= 9
    assert all("==" in dep for dep in pyproject_dependencies())
    assert pyproject_pins()["strands-agents"] == "1.62.0"


def test_conda_route_installs_what_make_lab_installs():
    """environment.yml's pip section is tools/workbook.py's install line (the pins under constraints.txt), and the
    conda, Binder and dev-container routes finish with the same script, which registers the kernel and settings."""
    workbook = load_workbook_tool()
    pip_install = workbook.install_commands("python", [])[0]
    assert pip_install[pip_install.index("-c"):] == ["-c", "constraints.txt", "-e", "."]
    assert environment_pip_lines() == ["-c constraints.txt", "-e ."]
    assert "python tools/workbook.py setup --here" in (REPO / "environment.yml").read_text()
    assert "python tools/workbook.py setup --here" in (REPO / "postBuild").read_text()
    devcontainer = json.loads((REPO / ".devcontainer" / "devcontainer.json").read_text())
    assert devcontainer["postCreateCommand"] == "python tools/workbook.py setup"
    makefile = (REPO / "Makefile").read_text()
    assert "$(PYTHON) tools/workbook.py setup --venv $(VENV)\n" in makefile, "make lab installs through the script"


def load_workbook_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("workbook_tool", REPO / "tools" / "workbook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_test_and_the_script_run_the_same_pytest_command():
    makefile = (REPO / "Makefile").read_text()
    block = re.search(r"^PYTEST_ARGS := (.*?)\n\n", makefile, re.MULTILINE | re.DOTALL).group(1)
    assert block.replace("\\\n", " ").split() == load_workbook_tool().PYTEST_ARGS


def test_the_no_make_script_runs(tmp_path):
    """The script itself, as a Windows user without make runs it: the plan it prints, and a clear refusal."""
    import subprocess
    import sys

    script = str(REPO / "tools" / "workbook.py")
    plan = subprocess.run([sys.executable, script, "test", "--dry-run", "--venv", str(tmp_path / "v")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "-c constraints.txt -e .[book,test]" in plan.stdout and "ipykernel install --sys-prefix" in plan.stdout
    assert f"{tmp_path / 'v'}/share/jupyter/lab/settings/overrides.json" in plan.stdout
    (tmp_path / "notavenv").mkdir()
    refused = subprocess.run([sys.executable, script, "setup", "--venv", str(tmp_path / "notavenv")],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "is not a virtual environment" in refused.stderr
    assert list((tmp_path / "notavenv").iterdir()) == [], "nothing was written into it"


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


def check_notebook_shape(notebook: dict, *, outputs: bool = True) -> None:
    """The workbook's notebook shape (also applied to templates/notebook.ipynb by tests/test_series_map.py, which has no
    committed outputs and so passes outputs=False)."""
    assert notebook["metadata"]["kernelspec"]["name"] == "agent-memory"
    cells = notebook["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and tagged[0]["cell_type"] == "code"
    source = [("".join(c["source"]), c["cell_type"]) for c in cells]
    assert any("reset_workspace(workspace)" in s for s, kind in source if kind == "code")
    headings = "\n".join(s for s, kind in source if kind == "markdown")
    for heading in ["## Check yourself", "## Summary", "## Exercises", "## What's next", "**What you will learn**"]:
        assert heading in headings, heading
    if outputs:
        printed = "".join("".join(o.get("data", {}).get("text/plain", "")) for c in cells if c["cell_type"] == "code"
                          for o in c.get("outputs", []))
        assert re.search(r"\d+ of \d+ claims hold", printed), "outputs are committed (the ledger included) so nbval compares them"
    assert not any("execution" in c["metadata"] for c in cells), "refresh with `make notebooks` (no run timestamps)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_shape(path):
    check_notebook_shape(json.loads(path.read_text()))
