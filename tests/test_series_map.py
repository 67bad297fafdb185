"""The series map stays true: every notebook states its claim, and notebook 00 and the README list every notebook
with that claim. The notebook template stays runnable and keeps the shape the other notebooks are held to."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import papermill
from notebook_runs import checks_held, ledger_text
from test_environment import check_notebook_shape

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CLAIM = re.compile(r"^\*\*The claim:\*\*\s*(.+?)\s*$", re.MULTILINE)
LEDGER_TAG = re.compile(r"\s*\[(?:[CS]\d+[ ,]*)+\]")  # the claims-ledger ids ([C1]) are not part of the sentence


def first_markdown(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "markdown")["source"])


def claim_of(path: Path) -> str:
    match = CLAIM.search(first_markdown(path))
    assert match, f"{path.name}: the first markdown cell has no '**The claim:** ...' line"
    return " ".join(LEDGER_TAG.sub("", match.group(1)).split())


def title_of(path: Path) -> str:
    heading = first_markdown(path).splitlines()[0]
    assert heading.startswith("# "), f"{path.name}: the first line is not a '# ' title"
    return heading[2:].strip()


def series_table(markdown: str) -> dict[str, str]:
    """Rows '| NN name | claim |' of a markdown table, keyed by the two-digit number."""
    rows = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.match(r"^`?\[?\d\d", cells[0]):
            rows[re.search(r"\d\d", cells[0]).group(0)] = " ".join(cells[1].split())
    return rows


def test_every_notebook_states_a_claim_and_a_title():
    for path in NOTEBOOKS:
        assert claim_of(path) and title_of(path).startswith(path.name[:2])


def test_notebook_00_lists_every_notebook_with_its_claim():
    cells = json.loads((REPO / "notebooks" / "00_orientation.ipynb").read_text(encoding="utf-8"))["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    rows = series_table(markdown)
    for path in NOTEBOOKS:
        number = path.name[:2]
        assert number in rows, f"notebook 00's series table has no row for {path.name}"
        assert rows[number] == claim_of(path), f"{path.name}: the claim in 00's table differs from the notebook's own"


def test_readme_lists_every_notebook():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert f"`{path.stem}`" in readme, f"README.md does not list {path.stem}"


def test_template_runs_and_has_the_shape(tmp_path, workspace_root):
    template = REPO / "templates" / "notebook.ipynb"
    assert claim_of(template) and title_of(template).startswith("NN")
    # test_notebook_shape's checks, all of them but one: the template has no committed outputs (it is copied, then run)
    check_notebook_shape(json.loads(template.read_text(encoding="utf-8")), outputs=False)
    papermill.execute_notebook(
        str(template), str(tmp_path / "t.ipynb"), parameters={"backend": "offline", "workspace": "template"},
        kernel_name="python3", cwd=str(REPO / "notebooks"), progress_bar=False, execution_timeout=120,
    )
    out = nbformat.read(tmp_path / "t.ipynb", as_version=4)
    assert checks_held(out), "the template's claims ledger was shown and every row holds"
    assert "2 of 2 claims hold" in ledger_text(out)
