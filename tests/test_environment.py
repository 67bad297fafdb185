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
    assert devcontainer["postAttachCommand"].startswith("python tools/workbook.py lab -- "), "opens lab as make lab does"
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


def test_make_lab_and_the_script_open_the_same_jupyterlab():
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^lab: \$\(STAMP\)\n\t(.+)$", makefile, re.MULTILINE).group(1).split()
    assert recipe == ["$(BIN)/python", *load_workbook_tool().lab_command("python", [])[1:]]


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


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_constraints_agree_with_the_pins():
    """constraints.txt pins every package; the learner's dependencies and every extra's name the same versions."""
    constraints = dict(
        line.split("==") for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line
    )
    lowered = {canonical(name): version for name, version in constraints.items()}
    for name, version in pyproject_pins().items():
        assert lowered[canonical(name)] == version, name
    for extra, requirements in pyproject()["project"]["optional-dependencies"].items():
        if extra == "dynamodb":  # installed by hand for notebook 06's cloud section, never by make: not in the constraints
            continue
        for requirement in requirements:
            name, version = requirement.split("==")
            assert lowered[canonical(name)] == version, f"{extra}: {name}"


# The learner's install (`make lab`) holds what the notebooks, the companion package and the class replay run; the test
# suite's tools come with `make test` (the `test` extra), the static book's with `make book` (the `book` extra).
TEST_TOOLS = {"pytest", "nbval", "ruff", "pytest-xdist", "playwright"}
# Packages the notebooks or the companion import that come with a dependency named in pyproject.toml as part of it:
# the module, and the dependency that requires it (checked below against the installed metadata).
COMES_WITH = {"ipython": "ipykernel", "botocore": "boto3", "nbformat": "papermill", "pydantic": "strands-agents",
              "werkzeug": "flask"}
# Imported only where that extra is installed (the import is guarded, and says how to install it).
IN_EXTRAS = {"strands-dynamodb-storage": "dynamodb"}


def test_the_test_tools_are_in_the_test_extra_not_the_learners_install():
    learner = {canonical(name) for name in pyproject_pins()}
    test_extra = {canonical(r.split("==")[0]) for r in pyproject()["project"]["optional-dependencies"]["test"]}
    assert not learner & TEST_TOOLS, f"test-only tools in the learner's install: {sorted(learner & TEST_TOOLS)}"
    assert TEST_TOOLS <= test_extra, sorted(TEST_TOOLS - test_extra)
    assert "cryptography" in learner, "notebook 09's Fernet is named, not reached only through moto"


def imported_modules() -> dict[str, set[str]]:
    """Every top-level module imported by the companion package or a notebook's code cells -> where."""
    import ast
    import sys

    found: dict[str, set[str]] = {}

    def scan(source: str, where: str) -> None:
        for node in ast.walk(ast.parse(source)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("companion", "__future__"):
                    found.setdefault(top, set()).add(where)

    for path in (REPO / "companion").rglob("*.py"):
        scan(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                lines = "".join(cell["source"]).splitlines()
                scan("\n".join(line for line in lines if not line.lstrip().startswith(("%", "!"))), path.name)
    return found


def requires(distribution: str) -> set[str]:
    """The installed distribution's requirements that apply here without extras (canonical names)."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    needed = set()
    for line in metadata.distribution(distribution).requires or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            needed.add(canonical(requirement.name))
    return needed


def test_the_learners_install_holds_every_package_the_notebooks_and_the_companion_import():
    """Each third-party module imported by companion/ or a notebook belongs to a dependency pyproject.toml names for
    learners, or comes with one as a part of it (COMES_WITH), or to an extra whose import is guarded (IN_EXTRAS). So a
    learner's `make lab` runs every notebook, and nothing the workbook uses arrives only as another package's choice."""
    import importlib.metadata as metadata

    learner = {canonical(name) for name in pyproject_pins()}
    owners = metadata.packages_distributions()
    unexplained = {}
    for module, where in imported_modules().items():
        distributions = {canonical(d) for d in owners.get(module, [])} or {canonical(module)}
        for distribution in distributions:
            if distribution in learner:
                continue
            parent = COMES_WITH.get(distribution)
            if parent in learner and distribution in requires(parent):
                continue
            if distribution in IN_EXTRAS:
                assert any(canonical(r.split("==")[0]) == distribution
                           for r in pyproject()["project"]["optional-dependencies"][IN_EXTRAS[distribution]])
                continue
            unexplained[distribution] = sorted(where)[:3]
    assert not unexplained, f"imported but not in the learner's dependencies (pyproject.toml): {unexplained}"


def test_notebook_00_checks_what_the_learners_install_holds():
    """The versions it prints are of packages `make lab` installs, or a learner reads an error on a correct install."""
    notebook = json.loads((REPO / "notebooks" / "00_orientation.ipynb").read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    listed = re.findall(r"metadata\.version\(\"([^\"]+)\"\)", code)
    learner = {canonical(name) for name in pyproject_pins()}
    assert listed and {canonical(name) for name in listed} <= learner, sorted(set(listed) - learner)
    assert not {canonical(name) for name in listed} & TEST_TOOLS


def test_the_package_ships_every_subpackage_of_the_companion():
    """pyproject.toml names the companion's packages one by one: a new layer folder must be added there too."""
    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "companion").rglob("__init__.py")}
    assert listed == on_disk, f"on disk, not listed: {sorted(on_disk - listed)}; listed, not on disk: {sorted(listed - on_disk)}"


def test_ci_calls_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text()


def check_cells(cells: list[dict]) -> None:
    """"Check yourself" is one code cell of at most 10 lines that decides the ledger in companion/checks."""
    start = next(i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                 and "## Check yourself" in "".join(c["source"]))
    end = next(i for i, c in enumerate(cells) if i > start and c["cell_type"] == "markdown"
               and re.search(r"^## ", "".join(c["source"]), re.MULTILINE))
    code = ["".join(c["source"]) for c in cells[start:end] if c["cell_type"] == "code"]
    assert len(code) == 1, f"'Check yourself' has {len(code)} code cells; one is the shape"
    lines = [line for line in code[0].splitlines() if line.strip()]
    assert len(lines) <= 10, f"'Check yourself' is {len(lines)} lines; at most 10"
    assert "from companion.checks import" in code[0] and ".report()" in code[0], code[0]


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
    for heading in ["## Check yourself", "## Summary", "## Exercises", "## What's next", "## Notes",
                    "**What you will learn**", "**Time to learn:**", "**Time to run:**"]:
        assert heading in headings, heading
    check_cells(cells)
    for text, kind in source:
        found = re.findall(r"site-packages|tests/test_\w+|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", text)
        assert not found, f"a site-packages path, test name or commit hash in a {kind} cell: {found}"
    if outputs:
        unrun = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and c.get("execution_count") is None]
        assert not unrun, f"code cells saved without a run (nbval compares no outputs there): {unrun}; refresh it"
        printed = "".join("".join(o.get("data", {}).get("text/plain", "")) for c in cells if c["cell_type"] == "code"
                          for o in c.get("outputs", []))
        assert re.search(r"\d+ of \d+ claims hold", printed), "outputs are committed (the ledger included) so nbval compares them"
    assert not any("execution" in c["metadata"] for c in cells), "refresh with `make notebooks` (no run timestamps)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_shape(path):
    check_notebook_shape(json.loads(path.read_text()))


def test_importing_strands_builds_no_grammar():
    """constraints.txt holds jsonschema at 4.23.0: from 4.24 its `format-nongpl` extra (which jupyter-events asks for)
    brings rfc3987-syntax, whose import builds a Lark grammar: 1.4 CPU-s in every process that imports strands (each
    kernel, each restart-test process), about three quarters of `import strands`."""
    import subprocess
    import sys

    probe = "import sys, strands; print(sorted(m for m in ('lark', 'rfc3987_syntax') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", f"importing strands loaded {loaded}: is jsonschema above 4.23 (constraints.txt)?"
