"""Notebook 00's series map, written from the notebooks themselves: one light row per notebook.

    .venv/bin/python tools/series_map.py            # print the map; exit 1 if notebook 00's differs
    .venv/bin/python tools/series_map.py --write    # rewrite the map in notebook 00

The table has one row per notebook: its number and title (its first `# ` heading), linked to the notebook, and its
time to learn (the `**Time to learn:** about N minutes.` line of its first cell; empty while it has none), with
"optional" before it for a deep dive (a title that starts "Deep dive" after its number). Each notebook states its own
claim; the book's landing page (tools/build_book.py) lists them all.

The map in notebook 00 starts at the table's header row (HEADER) and runs to the last `|` line after it (and through
a claims block that an earlier version put under it, which a rewrite removes); nothing else in the notebook is
changed, and outputs are kept (the map is markdown: rewriting it needs no new run).
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
HEADER = "| notebook | time to learn |"
RULE = "|---|---|"
SUMMARY = "<details><summary>The claim each notebook proves</summary>"
END = "</details>"
CLAIM = re.compile(r"^\*\*The claim:\*\*\s*(.+?)\s*$", re.MULTILINE)
LEDGER_TAG = re.compile(r"\s*\[(?:[CS]\d+[ ,]*)+\]")  # the claims-ledger ids ([C1]) are not part of the sentence
TIME_TO_LEARN = re.compile(r"\*\*Time to learn:\*\* about (\d+) minutes\.")
DEEP_DIVE = re.compile(r"^\d\d\s*·\s*Deep dive\b", re.IGNORECASE)
OPTIONAL = "optional"


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def first_markdown(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "markdown")["source"])


def row(path: Path) -> dict[str, str]:
    """The number, title, claim, time to learn and whether it is optional, read from its first markdown cell."""
    first = first_markdown(path)
    heading = first.splitlines()[0]
    if not heading.startswith("# "):
        raise SystemExit(f"{path.name}: the first line is not a '# ' title")
    claim = CLAIM.search(first)
    if not claim:
        raise SystemExit(f"{path.name}: the first markdown cell has no '**The claim:** ...' line")
    minutes = TIME_TO_LEARN.search(first)
    title = heading[2:].strip()
    return {
        "number": path.name[:2],
        "file": path.name,
        "title": title,
        "claim": " ".join(LEDGER_TAG.sub("", claim.group(1)).split()),
        "time to learn": f"about {minutes.group(1)} minutes" if minutes else "",
        "optional": bool(DEEP_DIVE.match(title)),
    }


def cell_text(text: str) -> str:
    """Text safe inside one table cell: on one line, with its pipes escaped."""
    return " ".join(text.split()).replace("|", r"\|")


def time_cell(r: dict) -> str:
    """'about 20 minutes', 'optional, about 20 minutes', 'optional', or '' (not measured yet)."""
    return ", ".join(part for part in (OPTIONAL if r["optional"] else "", r["time to learn"]) if part)


def render(rows: list[dict]) -> str:
    """The table, header first."""
    lines = [HEADER, RULE]
    for r in rows:
        time = time_cell(r)
        lines.append(f"| [{cell_text(r['title'])}]({r['file']}) |" + (f" {time} |" if time else " |"))
    return "\n".join(lines)


def expected_table() -> str:
    return render([row(path) for path in notebook_paths()])


def table_span(source: str) -> tuple[int, int] | None:
    """(start, end) character offsets of the map in a markdown source: from HEADER to the last `|` line after it,
    then through the `</details>` line of a claims block that follows it (after blank lines only)."""
    lines = source.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == HEADER]
    if len(starts) != 1:
        return None
    end = starts[0]
    while end + 1 < len(lines) and lines[end + 1].lstrip().startswith("|"):
        end += 1
    after = end + 1
    while after < len(lines) and not lines[after].strip():
        after += 1
    if after < len(lines) and lines[after].strip() == SUMMARY:
        closing = next((i for i in range(after, len(lines)) if lines[i].strip() == END), None)
        if closing is not None:
            end = closing
    offset = sum(len(line) for line in lines[: starts[0]])
    block = "".join(lines[starts[0] : end + 1])
    return offset, offset + len(block.rstrip("\n"))


def current_table(notebook: dict) -> str:
    """The series map as notebook 00 holds it now."""
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
    """Rewrite the map in notebook 00; True if it changed."""
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
    parser.add_argument("--write", action="store_true", help="rewrite the map in notebook 00")
    args = parser.parse_args(argv)
    if args.write:
        print(f"{ORIENTATION.name}: series map " + ("rewritten" if write() else "already up to date"))
        return 0
    table = expected_table()
    print(table)
    now = current_table(json.loads(ORIENTATION.read_text(encoding="utf-8")))
    if now != table:
        print(f"\n{ORIENTATION.name}'s series map differs: run `.venv/bin/python tools/series_map.py --write`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
