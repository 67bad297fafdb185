"""The Spanish edition kept in step with the English notebooks (tools/translate.py).

It fails when an English unit (a paragraph, list item, table row, heading, summary) has no current Spanish translation,
when a catalog holds an entry no English unit has any more, when a Spanish notebook is not what the tool builds now,
or when its code, outputs, kernel or tags differ from the English notebook's. Changing one English paragraph makes it
fail until the paragraph is translated again (shown on a copy below). The Spanish lesson path keeps the budgets.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import translate  # noqa: E402  (tools/ is not a package)

spec = importlib.util.spec_from_file_location("teaching_time", REPO / "tools" / "teaching_time.py")
teaching_time = importlib.util.module_from_spec(spec)
spec.loader.exec_module(teaching_time)
ENGLISH = translate.english_notebooks()


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.stem)
def test_every_unit_has_a_current_translation(path):
    missing = translate.untranslated(path)
    assert not missing, f"{path.name}: {len(missing)} units untranslated or fuzzy, e.g. {missing[0][:100]!r}"


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.stem)
def test_no_catalog_entry_outlives_its_english(path):
    stale = translate.stale_entries(path)
    assert not stale, f"{path.stem}.po: entries no English unit has (run tools/translate.py update): {stale[:2]}"


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.stem)
def test_the_spanish_notebook_is_what_the_tool_builds(path):
    spanish = translate.SPANISH / path.name
    assert spanish.is_file(), f"no notebooks/es/{path.name}: run tools/translate.py build"
    assert spanish.read_text(encoding="utf-8") == translate.notebook_text(translate.built(path)), (
        f"notebooks/es/{path.name} is stale: run tools/translate.py build")


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.stem)
def test_code_outputs_kernel_and_tags_are_the_english_ones(path):
    english = nbformat.read(path, as_version=4)
    spanish = nbformat.read(translate.SPANISH / path.name, as_version=4)
    assert spanish.metadata.kernelspec == english.metadata.kernelspec
    assert [c.cell_type for c in spanish.cells] == [c.cell_type for c in english.cells]
    for ours, theirs in zip(spanish.cells, english.cells):
        assert ours.metadata.get("tags", []) == theirs.metadata.get("tags", [])
        if ours.cell_type == "code":
            assert ours.source == theirs.source and ours.outputs == theirs.outputs


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.stem)
def test_the_spanish_lesson_path_keeps_the_budgets(path):
    figures = teaching_time.measure(translate.SPANISH / path.name)
    over = {key: figures[key] for key in teaching_time.over(figures)}
    assert not over, f"notebooks/es/{path.name}: over budget: {over}"


def test_the_spanish_00_says_the_conversations_stay_in_english():
    text = "\n".join(c.source for c in nbformat.read(translate.SPANISH / ENGLISH[0].name, as_version=4).cells
                     if c.cell_type == "markdown")
    assert "inglés" in text


def test_changing_an_english_paragraph_makes_it_stale_until_translated(tmp_path, monkeypatch):
    """On a copy: one English paragraph changed. Its unit has no current translation, the rebuilt Spanish notebook
    keeps that paragraph in English, `update` marks the old translation fuzzy (gettext's convention), and translating
    it again makes the notebook current."""
    source = ENGLISH[3]
    notebooks, catalogs = tmp_path / "notebooks", tmp_path / "locale"
    notebooks.mkdir()
    shutil.copy(source, notebooks / source.name)
    shutil.copytree(translate.CATALOGS, catalogs)
    monkeypatch.setattr(translate, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(translate, "SPANISH", notebooks / "es")
    monkeypatch.setattr(translate, "CATALOGS", catalogs)
    copy = notebooks / source.name
    notebook = nbformat.read(copy, as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "markdown" and "## Setup" in c.source)
    old = next(text for text, _ in translate.units(notebook) if text in cell.source and not text.startswith("Setup"))
    cell.source = cell.source.replace(old, old.replace("first", "at once"))
    nbformat.write(notebook, copy)
    new = old.replace("first", "at once")
    assert new in translate.untranslated(copy) and old in translate.stale_entries(copy)
    translate.build()
    assert new in (notebooks / "es" / source.name).read_text(encoding="utf-8"), "an untranslated unit stays in English"
    translate.update()
    entry = next(m for m in translate.read_catalog(translate.catalog_path(copy.stem)) if m.id == new)
    assert entry.fuzzy and entry.string, "update carries the old translation over, marked fuzzy"
    assert translate.stale_entries(copy) == [] and new in translate.untranslated(copy)
    entry.flags.discard("fuzzy")
    translate.catalog_path(copy.stem).write_bytes(translate.po_text(
        _with(translate.read_catalog(translate.catalog_path(copy.stem)), new, entry.string)))
    translate.build()
    assert translate.untranslated(copy) == [] and translate.check() == 0


def _with(catalog, msgid: str, text: str):
    message = catalog.get(msgid)
    message.string = text
    message.flags.discard("fuzzy")
    return catalog


def test_pieces_give_the_markdown_back():
    markdown = ("# Title\n\nA paragraph\nthat wraps.\n\n- an item\n  that wraps;\n- another.\n\n| a | b |\n|---|---|\n"
                "| 1 | 2 |\n\n<details><summary>Under the hood</summary>\n\nInside.\n</details>\n\n"
                "3. ```python\n   x = 1\n   ```\n   After the code.\n")
    pieces = translate.pieces(markdown)
    assert [p.text for p in pieces if p.unit] == ["Title", "A paragraph that wraps.", "an item that wraps;", "another.",
                                                  "| a | b |", "| 1 | 2 |", "Under the hood", "Inside.",
                                                  "After the code."]
    assert " ".join("".join(p.text for p in pieces).split()) == " ".join(markdown.split())
