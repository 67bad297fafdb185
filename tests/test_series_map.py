"""The series map stays true: every notebook states its claim; notebook 00's table lists every notebook with its title,
its time to learn and "optional" for a deep dive, and the claims block under it quotes every notebook's claim word for
word, as tools/series_map.py writes them; the README lists every notebook. The notebook template stays runnable and
keeps the shape the other notebooks are held to."""

from __future__ import annotations

import importlib.util
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
TIME_TO_LEARN = re.compile(r"^\*\*Time to learn:\*\* about (\d+) minutes\.$", re.MULTILINE)

spec = importlib.util.spec_from_file_location("series_map", REPO / "tools" / "series_map.py")
series_map = importlib.util.module_from_spec(spec)
spec.loader.exec_module(series_map)


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


def time_to_learn_of(path: Path) -> str:
    """'about N minutes', from the notebook's '**Time to learn:** about N minutes.' line; '' without one."""
    minutes = TIME_TO_LEARN.search(first_markdown(path))
    return f"about {minutes.group(1)} minutes" if minutes else ""


def is_deep_dive(path: Path) -> bool:
    """A title such as '10 · Deep dive: what a delete leaves behind'."""
    return re.match(r"^\d\d · Deep dive\b", title_of(path), re.IGNORECASE) is not None


def series_table(markdown: str) -> dict[str, list[str]]:
    """Rows '| [NN · title](file) | time to learn |' of a markdown table, keyed by the two-digit number."""
    rows = {}
    for line in markdown.splitlines():
        if not line.strip().startswith("|"):
            continue
        cells = [c.strip().replace(r"\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) >= 2 and re.match(r"^`?\[?\d\d", cells[0]):
            rows[re.search(r"\d\d", cells[0]).group(0)] = [" ".join(c.split()) for c in cells]
    return rows


def test_every_notebook_states_a_claim_and_a_title():
    for path in NOTEBOOKS:
        assert claim_of(path) and title_of(path).startswith(path.name[:2])


def orientation_markdown() -> str:
    cells = json.loads((REPO / "notebooks" / "00_orientation.ipynb").read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_notebook_00s_table_lists_every_notebook_with_its_title_and_time_to_learn():
    rows = series_table(orientation_markdown())
    assert sorted(rows) == [path.name[:2] for path in NOTEBOOKS], "one row per notebook, and no other"
    for path in NOTEBOOKS:
        link, minutes = rows[path.name[:2]]
        assert link == f"[{title_of(path)}]({path.name})", f"{path.name}: the row's title or link differs"
        expected = ", ".join(part for part in ("optional" if is_deep_dive(path) else "", time_to_learn_of(path)) if part)
        assert minutes == expected, f"{path.name}: the time to learn in 00's table differs"


def test_a_deep_dive_is_marked_optional_and_a_notebook_without_a_time_has_an_empty_cell():
    rows = [{"number": "09", "file": "09_x.ipynb", "title": "09 · Forgetting on purpose", "claim": "A claim.",
             "time to learn": "about 25 minutes", "optional": False},
            {"number": "10", "file": "10_y.ipynb", "title": "10 · Deep dive: what a delete leaves behind",
             "claim": "B | claim.", "time to learn": "about 20 minutes", "optional": True},
            {"number": "11", "file": "11_z.ipynb", "title": "11 · Later", "claim": "C.", "time to learn": "",
             "optional": False}]
    rendered = series_map.render(rows)
    table = series_table(rendered)
    assert table == {"09": ["[09 · Forgetting on purpose](09_x.ipynb)", "about 25 minutes"],
                     "10": ["[10 · Deep dive: what a delete leaves behind](10_y.ipynb)", "optional, about 20 minutes"],
                     "11": ["[11 · Later](11_z.ipynb)", ""]}
    assert "A claim." not in rendered, "the claims live in the notebooks (and the book's landing page), not in 00"
    assert series_map.DEEP_DIVE.match("10 · Deep dive: what a delete leaves behind")
    assert not series_map.DEEP_DIVE.match("09 · Forgetting on purpose: a deleted fact, proven gone")


def test_notebook_00s_table_is_what_tools_series_map_writes():
    notebook = json.loads((REPO / "notebooks" / "00_orientation.ipynb").read_text(encoding="utf-8"))
    assert series_map.current_table(notebook) == series_map.expected_table(), (
        "notebook 00's series map is stale: run `.venv/bin/python tools/series_map.py --write`")


def test_series_map_rewrites_only_the_table(tmp_path, monkeypatch):
    """--write on a copy of notebook 00 whose map is stale (an old table): the table is written, every other cell is
    kept."""
    copy = tmp_path / "00_orientation.ipynb"
    notebook = json.loads((REPO / "notebooks" / "00_orientation.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in notebook["cells"] if series_map.HEADER in "".join(c["source"]))
    source = "".join(cell["source"])
    start, end = series_map.table_span(source)
    cell["source"] = source[:start] + series_map.HEADER + "\n" + series_map.RULE + "\n| 00 stale | - |" + source[end:]
    copy.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    monkeypatch.setattr(series_map, "ORIENTATION", copy)
    assert series_map.main([]) == 1, "the check mode finds the stale table"
    assert series_map.write() is True and series_map.write() is False
    written = json.loads(copy.read_text(encoding="utf-8"))
    assert series_map.current_table(written) == series_map.expected_table()
    cell_after = next(c for c in written["cells"] if series_map.HEADER in "".join(c["source"]))
    assert "</details>" not in "".join(cell_after["source"]), "no claims block under the table"
    before = [c for c in notebook["cells"] if c is not cell]
    after = [c for c in written["cells"] if series_map.HEADER not in "".join(c["source"])]
    assert ["".join(c["source"]) for c in after] == ["".join(c["source"]) for c in before]
    assert [c.get("outputs") for c in after] == [c.get("outputs") for c in before]


def test_readme_lists_every_notebook_with_its_time_to_learn():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        line = next((ln for ln in readme.split("\n- ") if ln.startswith(f"`{path.stem}`")), None)
        assert line, f"README.md does not list {path.stem}"
        minutes = re.search(r"\*\*Time to learn:\*\* about (\d+) minutes", first_markdown(path)).group(1)
        assert f"About {minutes} minutes." in " ".join(line.split()), f"README's time for {path.stem} differs"


def test_readme_is_a_front_page():
    """At most 1,000 words, the two commands in its first 20 lines, and every link to a file in the repository
    resolving."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.split()) <= 1000, f"README.md is {len(readme.split())} words"
    top = "\n".join(readme.splitlines()[:20])
    assert "make lab" in top and "make test" in top
    links = re.findall(r"\]\(([^)#]+)\)", readme)
    assert links and all((REPO / link).exists() for link in links if "://" not in link), links


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
