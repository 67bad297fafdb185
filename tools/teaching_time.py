"""Teaching time per notebook, computed from the notebooks themselves, and the agendas of docs/instructor-guide.md.

    .venv/bin/python tools/teaching_time.py [--replay replays/defaults]

For each notebook in notebooks/ (whatever NN_name.ipynb files are there):

    teaching minutes = prose words / READING_WPM          (the instructor presents the markdown; solutions excluded)
                     + code lines / CODE_LINES_PER_MINUTE   (walking through the visible code, comments and blank lines excluded)
                     + executed seconds / 60                (the cells' run time, from a replay's executed notebooks)
                     + exercises * EXERCISE_MINUTES         (the numbered items of the "## Exercises" list)

The executed time comes from the papermill metadata (`duration` of each cell) of a replay with every notebook's defaults,
what learners run (`make replay ARGS=--defaults` writes replays/defaults/); without one it is left out ("n/a").
The agendas below are lists of notebooks and how many of their exercises are done in the room; the script adds
their minutes and says whether each fits its slot.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"

READING_WPM = 130  # presenting prose aloud with the notebook on screen: a speaking rate, slower than silent reading
CODE_LINES_PER_MINUTE = 10  # about 6 seconds per line of code shown and explained
EXERCISE_MINUTES = 6  # one exercise: read it, change a parameter or a line, re-run, compare with the solution

# name, slot in minutes, fixed minutes (set-up, breaks), and per notebook prefix the number of exercises done in the room
# (None = all of them). Notebooks not listed are left for self-study.
AGENDAS = [
    ("90-minute session", 90, {"set-up: clone, make lab, Run All of 00 (its environment check)": 10},
     {"01": 1}),
    ("half day (3.5 hours)", 210, {"set-up: clone, make lab, Run All of 00": 15, "break": 15},
     {"01": 1, "03": 1, "04": 1}),
    ("full day (6.5 hours of teaching)", 390, {"set-up": 15, "two breaks": 30, "wrap-up and questions": 15},
     {"00": 0, "01": 1, "02": 0, "03": 1, "04": 1, "06": 0}),
]


def _without_solutions(markdown: str) -> str:
    return re.sub(r"<details>.*?</details>", " ", markdown, flags=re.DOTALL)


def exercises(notebook: nbformat.NotebookNode) -> int:
    """The numbered items of the Exercises section (solutions excluded)."""
    count = 0
    for cell in notebook.cells:
        if cell.cell_type != "markdown" or "## Exercises" not in cell.source:
            continue
        section = _without_solutions(cell.source.split("## Exercises", 1)[1])
        section = re.split(r"^## ", section, flags=re.MULTILINE)[0]
        count += len(re.findall(r"^\d+\.\s", section, flags=re.MULTILINE))
    return count


def measure(path: Path, replay: Path | None) -> dict:
    notebook = nbformat.read(path, as_version=4)
    words = sum(len(_without_solutions(c.source).split()) for c in notebook.cells if c.cell_type == "markdown")
    code = sum(
        1 for c in notebook.cells if c.cell_type == "code" for line in c.source.splitlines()
        if line.strip() and not line.strip().startswith("#")
    )
    seconds = None
    if replay is not None and (replay / path.name).is_file():
        executed = nbformat.read(replay / path.name, as_version=4)
        seconds = sum(c.metadata.get("papermill", {}).get("duration") or 0 for c in executed.cells)
    count = exercises(notebook)
    talk = words / READING_WPM + code / CODE_LINES_PER_MINUTE + (seconds or 0) / 60
    return {"notebook": path.stem, "prose words": words, "code lines": code, "executed s": seconds, "exercises": count,
            "talk min": talk, "exercise min": count * EXERCISE_MINUTES, "total min": talk + count * EXERCISE_MINUTES}


def agenda_rows(measured: dict[str, dict], agenda: tuple) -> tuple[list[tuple[str, float]], float]:
    name, slot, fixed, plan = agenda
    rows = list(fixed.items())
    for prefix, done in plan.items():
        row = measured.get(prefix)
        if row is None:
            continue  # a notebook the series does not have (yet)
        done = row["exercises"] if done is None else min(done, row["exercises"])
        rows.append((f"{row['notebook']} ({done} of {row['exercises']} exercises)", row["talk min"] + done * EXERCISE_MINUTES))
    return rows, sum(minutes for _, minutes in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", type=Path, default=REPO / "replays" / "defaults",
                        help="a replay's output folder (default: replays/defaults/, from `make replay ARGS=--defaults`)")
    args = parser.parse_args(argv)
    replay = args.replay if (args.replay / "summary.json").is_file() else None
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    measured = {p.name[:2]: measure(p, replay) for p in paths}
    print(f"Teaching time per notebook ({READING_WPM} words/min of prose, {CODE_LINES_PER_MINUTE} code lines/min, "
          f"executed time from {replay.relative_to(REPO) if replay and replay.is_relative_to(REPO) else replay or 'no replay'}, "
          f"{EXERCISE_MINUTES} min per exercise)\n")
    print("| notebook | prose words | code lines | executed s | exercises | talk + run min | exercises min | total min |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for row in measured.values():
        executed = f"{row['executed s']:.1f}" if row["executed s"] is not None else "n/a"
        print(f"| {row['notebook']} | {row['prose words']} | {row['code lines']} | {executed} | {row['exercises']} | "
              f"{row['talk min']:.0f} | {row['exercise min']} | {row['total min']:.0f} |")
    total = sum(r["total min"] for r in measured.values())
    print(f"| all | {sum(r['prose words'] for r in measured.values())} | {sum(r['code lines'] for r in measured.values())} | "
          f"{sum(r['executed s'] or 0 for r in measured.values()):.1f} | {sum(r['exercises'] for r in measured.values())} | "
          f"{sum(r['talk min'] for r in measured.values()):.0f} | {sum(r['exercise min'] for r in measured.values())} | {total:.0f} |")
    fits = True
    for agenda in AGENDAS:
        rows, used = agenda_rows(measured, agenda)
        print(f"\n{agenda[0]}: {used:.0f} of {agenda[1]} minutes" + ("" if used <= agenda[1] else "  ** DOES NOT FIT **"))
        for label, minutes in rows:
            print(f"  {minutes:5.0f} min  {label}")
        fits = fits and used <= agenda[1]
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
