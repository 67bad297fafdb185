"""Each notebook's lesson path against the reading budgets, its time to learn, and the instructor guide's agendas.

    .venv/bin/python tools/teaching_time.py              # every notebook: the budget table, then the agendas
    .venv/bin/python tools/teaching_time.py --quote      # rewrite each notebook's "Time to learn" line
    .venv/bin/python tools/teaching_time.py notebooks/03_sliding_window.ipynb

Exit status 1 when a notebook is over a budget or an agenda does not fit its slot.

How it counts (the same definitions as the series' independent count, ../shared/tools/lesson_budget.py):

- The lesson path is every cell except the level-2 sections "Exercises" and "Notes" (from their heading to the next
  level-2 heading) and the text inside `<details>...</details>` blocks. A markdown cell may hold several sections.
- Markdown is cleaned first: code fences, HTML comments, images, tags and link targets removed (a link keeps its text).
- words: whitespace-separated tokens that hold a letter or a digit.
- paragraphs: blank-line blocks; each list item is one; headings and table rows are not paragraphs.
- w/sentence: the words of the paragraphs over their sentences; a sentence ends at . ! ? followed by a space and a
  capital, a digit, a backtick, an asterisk, a parenthesis or a quote.
- code lines: non-blank lines of code cells on the lesson path; longest cell: the most in one cell; width: the longest
  code line in characters.
- notes: the words of the "Notes" section; details: the words of the longest `<details>` block outside "Exercises"
  (an "Under the hood" aside).

Time to learn = lesson words / 130 (prose presented aloud) + code lines / 10 (about 6 s per line shown and explained)
+ the Run All time from benchmarks/results/notebook-times.json, rounded up to the next 5 minutes. Exercises are not
part of it: an agenda adds 6 minutes for each exercise done in the room.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
RUN_TIMES = REPO / "benchmarks" / "results" / "notebook-times.json"

BUDGET = {"words": 1800, "w/sentence": 18.0, "paragraph": 90, "code lines": 200, "longest cell": 30, "width": 88,
          "notes": 300, "details": 150, "minutes": 40}
READING_WPM = 130
CODE_LINES_PER_MINUTE = 10
EXERCISE_MINUTES = 6
OFF_PATH = re.compile(r"^##\s+(exercises|notes|ejercicios|notas)\b", re.IGNORECASE)  # English and Spanish
TIME_TO_LEARN = re.compile(r"\*\*Time to learn:\*\* about \d+ minutes\.")

# name, slot in minutes, fixed minutes (set-up, breaks), and per notebook prefix the exercises done in the room
# ("*": every notebook of the series, one exercise each).
AGENDAS = [
    ("90-minute session", 90, {"set-up: clone, make lab, run 00's first cells": 10},
     {"01": 1, "03": 1}),
    ("half day (3.5 hours)", 210, {"set-up": 15, "break": 15},
     {"01": 1, "03": 1, "04": 1, "05": 1}),
    ("full day (6.5 hours of teaching)", 390, {"set-up": 15, "two breaks": 30, "wrap-up and questions": 15},
     {"00": 1, "01": 1, "02": 1, "03": 1, "04": 1, "05": 1, "06": 1}),
    ("two days (13 hours of teaching)", 780, {"set-up": 15, "four breaks": 60, "two wrap-ups": 30},
     {"*": 1}),
]


def clean(markdown: str) -> str:
    markdown = re.sub(r"<details>.*?</details>", " ", markdown, flags=re.DOTALL | re.IGNORECASE)
    markdown = re.sub(r"```.*?```", " ", markdown, flags=re.DOTALL)
    markdown = re.sub(r"<!--.*?-->", " ", markdown, flags=re.DOTALL)
    markdown = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", markdown)
    markdown = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"<[^>]+>", " ", markdown)


def words(text: str) -> int:
    return sum(1 for token in text.split() if re.search(r"[A-Za-z0-9]", token))


def paragraphs(markdown: str) -> list[str]:
    found: list[str] = []
    for block in re.split(r"\n\s*\n", markdown):
        item: list[str] = []
        for line in (line.strip() for line in block.splitlines()):
            if not line:
                continue
            if line.startswith(("#", "|")) or (re.match(r"([-*+]|\d+\.)\s", line) and item):
                if item:
                    found.append(" ".join(item))
                item = []
                if line.startswith(("#", "|")):
                    continue
            item.append(line)
        if item:
            found.append(" ".join(item))
    return found


def split(notebook: nbformat.NotebookNode) -> tuple[list[tuple[str, str]], int, list[int]]:
    """(cell type, text) of the lesson path, the words of "Notes", and the words of each aside outside "Exercises"."""
    on_path, section, path, notes, asides = True, "", [], 0, []
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            if on_path:
                path.append((cell.cell_type, cell.source))
            continue
        for part in re.split(r"(?m)^(?=##\s)", cell.source):
            heading = re.match(r"##\s+\S.*", part)
            if heading:
                section = heading.group(0).lower()
                on_path = not OFF_PATH.match(heading.group(0))
            if not part.strip():
                continue
            if on_path:
                path.append(("markdown", part))
            if re.match(r"##\s+(notes|notas)\b", section):
                notes += words(clean(part))
            elif not re.match(r"##\s+(exercises|ejercicios)\b", section):
                asides += [words(clean(b)) for b in re.findall(r"<details>(.*?)</details>", part, re.S | re.I)]
    return path, notes, asides


def run_seconds(name: str) -> float:
    results = json.loads(RUN_TIMES.read_text()) if RUN_TIMES.is_file() else {"notebooks": {}}
    return results["notebooks"].get(name, {}).get("wall_seconds", 0.0)


def exercises(notebook: nbformat.NotebookNode) -> int:
    """The numbered items of the "Exercises" section (solutions excluded)."""
    text = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    section = re.search(r"^## Exercises\s*$(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    if not section:
        return 0
    body = re.sub(r"<details>.*?</details>", " ", section.group(1), flags=re.DOTALL)
    return len(re.findall(r"^\d+\.\s", body, re.MULTILINE))


def measure(path: Path, notebook: nbformat.NotebookNode | None = None) -> dict:
    """The figures of the notebook at `path` (or of `notebook`, a version of it not yet written there)."""
    notebook = notebook if notebook is not None else nbformat.read(path, as_version=4)
    on_path, notes, asides = split(notebook)
    markdown = "\n\n".join(clean(text) for kind, text in on_path if kind == "markdown")
    paras = paragraphs(markdown)
    sentences = [s for p in paras for s in re.split(r"(?<=[.!?])\s+(?=[A-ZÁÉÍÓÚÑ¿¡`*(\"'0-9])", p) if words(s)]
    code = [[line for line in text.splitlines() if line.strip()] for kind, text in on_path if kind == "code"]
    total = sum(words(p) for p in paras)
    lines = sum(len(c) for c in code)
    seconds = run_seconds(path.name)
    minutes = total / READING_WPM + lines / CODE_LINES_PER_MINUTE + seconds / 60
    return {
        "notebook": path.stem,
        "words": total,
        "w/sentence": round(total / max(1, len(sentences)), 1),
        "paragraph": max((words(p) for p in paras), default=0),
        "code lines": lines,
        "longest cell": max((len(c) for c in code), default=0),
        "width": max((len(line) for c in code for line in c), default=0),
        "notes": notes,
        "details": max(asides, default=0),
        "minutes": minutes,
        "time to learn": 5 * math.ceil(minutes / 5),
        "exercises": exercises(notebook),
    }


def over(figures: dict) -> list[str]:
    return [key for key, limit in BUDGET.items() if figures[key] > limit]


def time_to_learn_line(figures: dict) -> str:
    return f"**Time to learn:** about {figures['time to learn']} minutes."


def quote(paths: list[Path]) -> None:
    """Rewrite the "Time to learn" line of each notebook's first cell."""
    sys.path.insert(0, str(REPO / "tools"))
    from refresh_notebooks import write

    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        first = notebook.cells[0]
        line = time_to_learn_line(measure(path))
        if not TIME_TO_LEARN.search(first.source):
            raise SystemExit(f"{path.name}: no '**Time to learn:** about N minutes.' in the first cell")
        updated = TIME_TO_LEARN.sub(line, first.source)
        if updated != first.source:
            first.source = updated
            write(notebook, path)
            print(f"quoted in {path.name}: {line}")


def agenda_rows(measured: dict[str, dict], agenda: tuple) -> tuple[list[tuple[str, float]], float]:
    name, slot, fixed, plan = agenda
    rows = list(fixed.items())
    if "*" in plan:
        plan = {prefix: plan["*"] for prefix in measured}
    for prefix, done in plan.items():
        figures = measured.get(prefix)
        if figures is None:
            rows.append((f"{prefix}: no such notebook", math.inf))
            continue
        done = min(done, figures["exercises"])
        rows.append((f"{figures['notebook']} ({done} of {figures['exercises']} exercises)",
                     figures["time to learn"] + done * EXERCISE_MINUTES))
    return rows, sum(minutes for _, minutes in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/NN_*.ipynb")
    parser.add_argument("--quote", action="store_true", help="rewrite each notebook's 'Time to learn' line")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if args.quote:
        quote(paths)
        return 0
    measured = {p.name[:2]: measure(p) for p in paths}
    keys = list(BUDGET)
    print(f"{'notebook':34s}" + "".join(f"{k:>13s}" for k in keys) + f"{'learn':>8s}")
    print(f"{'budget':34s}" + "".join(f"{v:>13}" for v in BUDGET.values()))
    failed = False
    for figures in measured.values():
        bad = over(figures)
        failed |= bool(bad)
        shown = {k: round(figures[k], 1) if k == "minutes" else figures[k] for k in keys}
        print(f"{figures['notebook'][:34]:34s}" + "".join(f"{str(shown[k]) + ('*' if k in bad else ''):>13s}"
                                                          for k in keys) + f"{figures['time to learn']:>8}")
    print("* over budget" if failed else "every notebook within budget")
    if args.notebooks:
        return 1 if failed else 0
    total = sum(f["time to learn"] + f["exercises"] * EXERCISE_MINUTES for f in measured.values())
    print(f"\nThe whole series, every exercise done: {total} minutes")
    for agenda in AGENDAS:
        rows, used = agenda_rows(measured, agenda)
        fits = used <= agenda[1]
        failed |= not fits
        print(f"\n{agenda[0]}: {used:.0f} of {agenda[1]} minutes" + ("" if fits else "  ** DOES NOT FIT **"))
        for label, minutes in rows:
            print(f"  {minutes:5.0f} min  {label}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
