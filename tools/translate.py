"""The Spanish edition: one gettext catalog per notebook, and notebooks/es/ generated from the English notebooks.

    .venv/bin/python tools/translate.py update   # rewrite locale/es/LC_MESSAGES/NN_name.po from the English notebooks
    .venv/bin/python tools/translate.py build    # write notebooks/es/NN_name.ipynb from each notebook and its catalog
    .venv/bin/python tools/translate.py check    # exit 1 when a catalog or a Spanish notebook is not current

A catalog holds one entry per unit of the English notebook's markdown: a paragraph, a list item, a table row, a
heading, or the text of a `<summary>`. Code (fenced blocks, code cells) and HTML tags are not translated, and the
scripted conversations stay in English: they are data the offline model reads. `update` keeps every translation whose
English is unchanged, marks one whose English changed `fuzzy` (gettext's convention: Babel matches the old English to
the new) so the translator sees what moved, adds new units untranslated, and drops units the English no longer has.

`build` copies each English notebook, code cells, outputs, kernel and tags unchanged, and replaces every unit of its
markdown with the catalog's translation; a unit without a current translation (missing or fuzzy) stays in English,
and `check` fails until it is translated. A paragraph's translation is written on one line (Markdown renders it the
same). Links to ../docs/ become ../../docs/, one folder deeper.

Any PO editor (Poedit, Lokalize, a text editor) edits the catalogs; Babel reads and writes them here.
"""

from __future__ import annotations

import argparse
import copy
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

sys.path.insert(0, str(Path(__file__).resolve().parent))
import teaching_time  # noqa: E402  (tools/ is not a package: the same reading counts for both editions)

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
SPANISH = NOTEBOOKS / "es"
CATALOGS = REPO / "locale" / "es" / "LC_MESSAGES"

FENCE = re.compile(r"^\s*(?:(?:[-*+]|\d+\.)\s+)?```")
HEADING = re.compile(r"^(#{1,6}\s+)(.*?)(\s*)$")
TABLE_RULE = re.compile(r"^\s*\|[\s|:-]*\|\s*$")
ITEM = re.compile(r"^(\s*(?:[-*+]|\d+\.)\s+)(.*)$")
SUMMARY = re.compile(r"^(\s*<details>\s*<summary>)(.*?)(</summary>.*)$")
TAG_LINE = re.compile(r"^\s*</?[a-zA-Z][^>]*>\s*$")


@dataclass
class Piece:
    """A stretch of markdown: text to translate (`unit`), or text copied as it is."""

    text: str
    unit: bool = False


def pieces(markdown: str) -> list[Piece]:
    """The markdown cut into units and the text between them; joining every piece's text gives the markdown back,
    except that a unit spanning several lines is given as one line of normalised text."""
    out: list[Piece] = []
    lines = markdown.splitlines(keepends=True)
    i, in_fence = 0, False
    while i < len(lines):
        line = lines[i]
        body = line.rstrip("\n")
        if in_fence or FENCE.match(body):
            opens_or_closes = FENCE.match(body) is not None
            out.append(Piece(line))
            if opens_or_closes:
                in_fence = not in_fence
            i += 1
            continue
        if not body.strip() or TAG_LINE.match(body) or TABLE_RULE.match(body):
            out.append(Piece(line))
            i += 1
            continue
        if match := SUMMARY.match(body):
            out += [Piece(match.group(1)), Piece(match.group(2), unit=True), Piece(match.group(3) + line[len(body):])]
            i += 1
            continue
        if match := HEADING.match(body):
            out += [Piece(match.group(1)), Piece(match.group(2), unit=True), Piece(match.group(3) + line[len(body):])]
            i += 1
            continue
        if body.lstrip().startswith("|"):
            out += [Piece(body, unit=True), Piece(line[len(body):])]
            i += 1
            continue
        prefix = ""
        if match := ITEM.match(body):
            prefix, first = match.group(1), match.group(2)
        else:  # a paragraph; indented, it continues a list item (after a code block in a solution, say)
            prefix, first = body[: len(body) - len(body.lstrip())], body.lstrip()
        gathered = [first.strip()]
        i += 1
        while i < len(lines):  # the paragraph's (or the item's) further lines
            nxt = lines[i].rstrip("\n")
            if (not nxt.strip() or FENCE.match(nxt) or TAG_LINE.match(nxt) or HEADING.match(nxt)
                    or nxt.lstrip().startswith("|") or ITEM.match(nxt) or SUMMARY.match(nxt)):
                break
            gathered.append(nxt.strip())
            i += 1
        if prefix:
            out.append(Piece(prefix))
        out += [Piece(" ".join(gathered), unit=True), Piece("\n")]
    if out and markdown and not markdown.endswith("\n") and out[-1].text == "\n" and not out[-1].unit:
        out.pop()
    return out


def units(notebook: nbformat.NotebookNode) -> list[tuple[str, int]]:
    """Every unit of the notebook's markdown, with the index of its cell, in order."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            found += [(piece.text, index) for piece in pieces(cell.source) if piece.unit]
    return found


def catalog_path(name: str) -> Path:
    return CATALOGS / f"{name}.po"


def english_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


HEADER = ("# The Spanish edition of one notebook of the agent-memory workbook: one entry per unit of its markdown\n"
          "# (tools/translate.py). CC BY 4.0, as the notebooks' prose.")


def read_catalog(path: Path) -> Catalog:
    if not path.is_file():
        catalog = Catalog(locale="es", domain=path.stem, project="agent-memory-workbook", version="1",
                          copyright_holder="the workbook's authors (CC BY 4.0)", msgid_bugs_address="the repository's issues",
                          last_translator="the workbook's authors", language_team="es", header_comment=HEADER,
                          fuzzy=False)
        return catalog
    with path.open("rb") as handle:
        return read_po(handle, locale="es", domain=path.stem)


def template(path: Path) -> Catalog:
    notebook = nbformat.read(path, as_version=4)
    catalog = Catalog(locale="es", domain=path.stem, project="agent-memory-workbook")
    for text, index in units(notebook):
        catalog.add(text, locations=[(f"notebooks/{path.name}", index)])
    return catalog


def po_text(catalog: Catalog) -> bytes:
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=100, ignore_obsolete=True, omit_header=False, sort_output=False)
    return buffer.getvalue()


def updated(path: Path) -> bytes:
    """The catalog of `path` as `update` writes it."""
    catalog = read_catalog(catalog_path(path.stem))
    catalog.update(template(path), no_fuzzy_matching=False, update_header_comment=False)
    catalog.revision_date = catalog.creation_date  # no timestamp of the run in the file: the same input, the same bytes
    return po_text(catalog)


def translations(name: str) -> dict[str, str]:
    """English unit -> Spanish, for every current (translated, not fuzzy) entry of the catalog."""
    catalog = read_catalog(catalog_path(name))
    return {message.id: message.string for message in catalog
            if message.id and message.string and not message.fuzzy}


def spanish_markdown(markdown: str, spanish: dict[str, str]) -> str:
    out = []
    for piece in pieces(markdown):
        out.append(spanish.get(piece.text, piece.text) if piece.unit else piece.text)
    return "".join(out).replace("](../docs/", "](../../docs/")


SPANISH_TIME = re.compile(r"\*\*Tiempo de aprendizaje:\*\* unos (\d+) minutos\.")
TABLE_TIME = re.compile(r"^(\|\s*\[[^\]]*\]\((\d\d_[\w]+\.ipynb)\)\s*\|[^|\n]*?)unos \d+ minutos", re.MULTILINE)


def translated(path: Path) -> nbformat.NotebookNode:
    """The notebook of `path` with its markdown in Spanish, and its own time to learn measured on the Spanish text
    (tools/teaching_time.py: the counts apply to both editions)."""
    notebook = copy.deepcopy(nbformat.read(path, as_version=4))
    spanish = translations(path.stem)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = spanish_markdown(cell.source, spanish)
    notebook.metadata["language"] = "es"
    minutes = teaching_time.measure(SPANISH / path.name, notebook)["time to learn"]
    first = notebook.cells[0]
    first.source = SPANISH_TIME.sub(f"**Tiempo de aprendizaje:** unos {minutes} minutos.", first.source)
    return notebook


def built(path: Path) -> nbformat.NotebookNode:
    """The Spanish notebook of `path`, as `build` writes it. In 00, the series map's times are the Spanish
    notebooks' own."""
    notebook = translated(path)
    if path.name.startswith("00_"):
        times = {}
        for other in english_notebooks():
            found = SPANISH_TIME.search(translated(other).cells[0].source)
            if found:
                times[other.name] = found.group(1)

        def retime(match: re.Match) -> str:
            minutes = times.get(match.group(2))
            return f"{match.group(1)}unos {minutes} minutos" if minutes else match.group(0)

        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                cell.source = TABLE_TIME.sub(retime, cell.source)
    return notebook


def notebook_text(notebook: nbformat.NotebookNode) -> str:
    return nbformat.writes(notebook, version=nbformat.NO_CONVERT) + "\n"


def untranslated(path: Path) -> list[str]:
    """The units of `path` that have no current translation."""
    spanish = translations(path.stem)
    return [text for text, _ in units(nbformat.read(path, as_version=4)) if text not in spanish]


def stale_entries(path: Path) -> list[str]:
    """Catalog entries (current or fuzzy) that no unit of the English notebook has any more."""
    wanted = {text for text, _ in units(nbformat.read(path, as_version=4))}
    return [message.id for message in read_catalog(catalog_path(path.stem)) if message.id and message.id not in wanted]


def shown(path: Path) -> str:
    """A path as printed: relative to the repository when it is inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def update() -> None:
    CATALOGS.mkdir(parents=True, exist_ok=True)
    for path in english_notebooks():
        text = updated(path)
        target = catalog_path(path.stem)
        if not target.is_file() or target.read_bytes() != text:
            target.write_bytes(text)
            print(f"updated {shown(target)}")


def build() -> None:
    SPANISH.mkdir(exist_ok=True)
    names = set()
    for path in english_notebooks():
        names.add(path.name)
        text = notebook_text(built(path))
        target = SPANISH / path.name
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            print(f"built {shown(target)}")
    for stale in SPANISH.glob("*.ipynb"):
        if stale.name not in names:
            stale.unlink()
            print(f"removed {shown(stale)}")


def check() -> int:
    problems = []
    for path in english_notebooks():
        if missing := untranslated(path):
            problems.append(f"{path.name}: {len(missing)} units without a current translation, e.g. {missing[0][:70]!r}")
        if stale := stale_entries(path):
            problems.append(f"{path.name}: {len(stale)} catalog entries no English unit has, e.g. {stale[0][:70]!r}")
        target = SPANISH / path.name
        if not target.is_file() or target.read_text(encoding="utf-8") != notebook_text(built(path)):
            problems.append(f"notebooks/es/{path.name} is not what `tools/translate.py build` writes now")
    for line in problems:
        print(line)
    print("every catalog and Spanish notebook is current" if not problems else
          "run `tools/translate.py update`, translate in locale/es/, then `tools/translate.py build`")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("update", "build", "check"))
    args = parser.parse_args(argv)
    if args.command == "update":
        update()
    elif args.command == "build":
        build()
    else:
        return check()
    return 0


if __name__ == "__main__":
    sys.exit(main())
