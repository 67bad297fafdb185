"""Every notebook's lesson path within the reading budgets, and its "Time to learn" line the computed one.

tools/teaching_time.py counts (its docstring says how); ../shared/tools/lesson_budget.py, outside this repository, is
an independent count with the same definitions.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("teaching_time", REPO / "tools" / "teaching_time.py")
teaching_time = importlib.util.module_from_spec(spec)
spec.loader.exec_module(teaching_time)
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS + [REPO / "templates" / "notebook.ipynb"], ids=lambda p: p.name)
def test_the_lesson_path_is_within_every_budget(path):
    figures = teaching_time.measure(path)
    over = {key: (figures[key], teaching_time.BUDGET[key]) for key in teaching_time.over(figures)}
    assert not over, f"{path.name}: over budget (measured, limit): {over}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_time_to_learn_line_is_the_computed_one(path):
    first = nbformat.read(path, as_version=4).cells[0].source
    expected = teaching_time.time_to_learn_line(teaching_time.measure(path))
    assert teaching_time.TIME_TO_LEARN.findall(first) == [expected], (
        f"{path.name}: run `.venv/bin/python tools/teaching_time.py --quote`")


def markdown_notebook(tmp_path: Path, *cells: str) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(c) if not c.startswith("CODE:") else
                      nbformat.v4.new_code_cell(c[5:]) for c in cells]
    path = tmp_path / "nb.ipynb"
    nbformat.write(notebook, path)
    return path


def test_the_count_leaves_out_exercises_notes_and_asides(tmp_path):
    path = markdown_notebook(
        tmp_path,
        "# Title\n\nOne two three. Four five six.\n\n<details><summary>Under the hood</summary>\n\n"
        + "aside " * 40 + "\n</details>",
        "CODE:x = 1\n\ny = 2",
        "## Exercises\n\n1. " + "word " * 500,
        "CODE:" + "\n".join(f"z{i} = {i}" for i in range(50)),
        "## Notes\n\n1. " + "source " * 20,
    )
    figures = teaching_time.measure(path)
    assert figures["words"] == 6 and figures["w/sentence"] == 3.0  # "# Title" is a heading: not counted
    assert figures["code lines"] == 2 and figures["longest cell"] == 2
    assert figures["notes"] == 22 and figures["details"] == 43
    assert figures["exercises"] == 1


def test_a_long_paragraph_and_a_wide_line_are_over(tmp_path):
    path = markdown_notebook(tmp_path, "# T\n\n" + "word " * 91, "CODE:" + "x = '" + "a" * 90 + "'")
    assert set(teaching_time.over(teaching_time.measure(path))) == {"paragraph", "w/sentence", "width"}


def test_the_agendas_fit_and_the_script_says_so(capsys):
    """The instructor guide's four agendas (90 minutes: 01 and 03; half day: 01, 03, 04, 05; full day: 00-06; the
    whole series in two days), each with one exercise per notebook, fit their slots by this measure."""
    assert teaching_time.main([]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    agendas = re.findall(r"^(.+): (\d+) of (\d+) minutes(  \*\* DOES NOT FIT \*\*)?$", out, re.MULTILINE)
    assert [name for name, *_ in agendas] == [a[0] for a in teaching_time.AGENDAS]
    for name, used, limit, flagged in agendas:
        block = out.split(f"{name}: {used} of {limit} minutes", 1)[1].split("\n\n", 1)[0]
        listed = [int(m) for m in re.findall(r"^\s+(\d+) min  ", block, re.MULTILINE)]
        assert abs(sum(listed) - int(used)) <= len(listed), (name, listed, used)  # a recount (rounding)
        assert not flagged and int(used) <= int(limit), name
    whole = out.split("two days", 1)[1]
    assert all(path.stem in whole for path in NOTEBOOKS), "the two days teach every notebook"


def test_an_agenda_that_does_not_fit_exits_1(monkeypatch, capsys):
    monkeypatch.setattr(teaching_time, "AGENDAS", [("a short talk", 20, {"set-up": 10}, {"01": 1, "03": 1})])
    assert teaching_time.main([]) == 1
    out = capsys.readouterr().out
    assert "a short talk: " in out and "of 20 minutes  ** DOES NOT FIT **" in out


def test_the_instructor_guide_quotes_the_agendas_as_the_script_counts_them(capsys):
    teaching_time.main([])
    out = capsys.readouterr().out
    counted = re.findall(r"^.+: (\d+) of (\d+) minutes", out, re.MULTILINE)
    guide = (REPO / "docs" / "instructor-guide.md").read_text(encoding="utf-8")
    quoted = re.findall(r"^### .*\((\d+) of (\d+) minutes", guide, re.MULTILINE)
    assert quoted == counted, "docs/instructor-guide.md's agenda headings: run tools/teaching_time.py and copy them"
