"""Notebook 00's series map: one table row per notebook, written from the notebooks themselves.

    .venv/bin/python tools/series_map.py            # print the table; exit 1 if notebook 00's differs
    .venv/bin/python tools/series_map.py --write    # rewrite the table in notebook 00

Each row: the notebook's number and title (its first `# ` heading), linked to the notebook; its claim, word for word
(the `**The claim:**` line of its first cell, without the ledger id such as `[C1]`); and its time to learn (the
`**Time to learn:** about N minutes.` line of its first cell, or "not yet measured" when it has none). The table in
notebook 00 starts at its header row (HEADER) and runs to the last `|` line after it; nothing else in the notebook is
changed, and outputs are kept (a table is markdown: rewriting it needs no new run).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
ORIENTATION = NOTEBOOKS / "00_orientation.ipynb"
HEADER = "| notebook | the claim it proves | time to learn |"
RULE = "|---|---|---|"
CLAIM = re.compile(r"^\*\*The claim:\*\*\s*(.+?)\s*$", re.MULTILINE)
LEDGER_TAG = re.compile(r"\s*\[(?:[CS]\d+[ ,]*)+\]")  # the claims-ledger ids ([C1]) are not part of the sentence
TIME_TO_LEARN = re.compile(r"\*\*Time to learn:\*\* about (\d+) minutes\.")
NOT_MEASURED = "not yet measured"


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def first_markdown(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "markdown")["source"])


def row(path: Path) -> dict[str, str]:
    """The number, title, claim and time to learn of one notebook, read from its first markdown cell."""
    first = first_markdown(path)
    heading = first.splitlines()[0]
    if not heading.startswith("# "):
        raise SystemExit(f"{path.name}: the first line is not a '# ' title")
    claim = CLAIM.search(first)
    if not claim:
        raise SystemExit(f"{path.name}: the first markdown cell has no '**The claim:** ...' line")
    minutes = TIME_TO_LEARN.search(first)
    return {
        "number": path.name[:2],
        "file": path.name,
        "title": heading[2:].strip(),
        "claim": " ".join(LEDGER_TAG.sub("", claim.group(1)).split()),
        "time to learn": f"about {minutes.group(1)} minutes" if minutes else NOT_MEASURED,
    }


def cell_text(text: str) -> str:
    """Text safe inside one table cell: on one line, with its pipes escaped."""
    return " ".join(text.split()).replace("|", r"\|")


def render(rows: list[dict[str, str]]) -> str:
    """The markdown table, header first."""
    lines = [HEADER, RULE]
    for r in rows:
        lines.append(f"| [{cell_text(r['title'])}]({r['file']}) | {cell_text(r['claim'])} | {r['time to learn']} |")
    return "\n".join(lines)


def expected_table() -> str:
    return render([row(path) for path in notebook_paths()])


def table_span(source: str) -> tuple[int, int] | None:
    """(start, end) character offsets of the table in a markdown source: from HEADER to the last `|` line after it."""
    lines = source.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == HEADER]
    if len(starts) != 1:
        return None
    end = starts[0]
    while end + 1 < len(lines) and lines[end + 1].lstrip().startswith("|"):
        end += 1
    offset = sum(len(line) for line in lines[: starts[0]])
    table = "".join(lines[starts[0] : end + 1])
    return offset, offset + len(table.rstrip("\n"))


def current_table(notebook: dict) -> str:
    """The series table as notebook 00 holds it now."""
    found = []
    for cell in notebook["cells"]:
        source = "".join(cell["source"]) if cell["cell_type"] == "markdown" else ""
        span = table_span(source)
        if span:
            found.append(source[span[0] : span[1]])
    if len(found) != 1:
        raise SystemExit(f"{ORIENTATION.name}: {len(found)} series tables (a line '{HEADER}'); expected one")
    return found[0]


def write() -> bool:
    """Rewrite the table in notebook 00; True if it changed."""
    import nbformat

    sys.path.insert(0, str(REPO / "tools"))
    from refresh_notebooks import write as write_notebook

    notebook = nbformat.read(ORIENTATION, as_version=4)
    table = expected_table()
    for cell in notebook.cells:
        span = table_span(cell.source) if cell.cell_type == "markdown" else None
        if span:
            updated = cell.source[: span[0]] + table + cell.source[span[1] :]
            if updated == cell.source:
                return False
            cell.source = updated
            write_notebook(notebook, ORIENTATION)
            return True
    raise SystemExit(f"{ORIENTATION.name}: no series table (a line '{HEADER}')")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the table in notebook 00")
    args = parser.parse_args(argv)
    if args.write:
        print(f"{ORIENTATION.name}: series table " + ("rewritten" if write() else "already up to date"))
        return 0
    table = expected_table()
    print(table)
    now = current_table(json.loads(ORIENTATION.read_text(encoding="utf-8")))
    if now != table:
        print(f"\n{ORIENTATION.name}'s table differs: run `.venv/bin/python tools/series_map.py --write`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
