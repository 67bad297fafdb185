"""How long each notebook takes to run on the offline model, kernel start included: the figure behind every notebook's
"Time to run" line.

Run: .venv/bin/python benchmarks/notebook_times.py [NN ...]      (default: every notebook; run it on an idle machine)
     .venv/bin/python benchmarks/notebook_times.py --quote          (rewrite each notebook's "Time to run" line from
                                                                      the results; only that markdown line changes)
Each notebook runs as a learner's Run All does (the offline model, from notebooks/, writing only under workspace/), on
a copy in memory: the committed notebook is never rewritten. For each one it records the wall-clock seconds and the
processor seconds of the kernel and every process it started (notebook 01's restarts, 11's local endpoint), which
depend far less on what else the machine is doing. The machine's core count and load average are recorded beside them.
Results: benchmarks/results/notebook-times.json; tests/test_notebook_times.py checks that each notebook's "Time to run"
line quotes them.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
RESULTS = REPO / "benchmarks" / "results" / "notebook-times.json"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(path: Path) -> dict[str, float]:
    """One Run All of `path` on a fresh kernel; the kernel is shut down (and its CPU counted) before this returns."""
    notebook = nbformat.read(path, as_version=4)
    started_wall, started_cpu = time.monotonic(), children_cpu()
    NotebookClient(notebook, timeout=600, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return {"wall_seconds": round(time.monotonic() - started_wall, 1),
            "cpu_seconds": round(children_cpu() - started_cpu, 1)}


def commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


TIME_LINE = re.compile(r"\*\*Time to run:\*\*[^\n]*")  # one line


def about(seconds: float) -> str:
    """A learner's estimate: seconds to the nearest 5 under two minutes, else minutes to the nearest half."""
    if seconds < 120:
        return f"about {max(5, 5 * round(seconds / 5))} seconds"
    return f"about {round(seconds / 30) / 2:g} minutes"


def time_line(name: str, results: dict) -> str:
    """The "Time to run" line of notebook `name`, quoting the results file."""
    return f"**Time to run:** {about(results['notebooks'][name]['wall_seconds'])}."


def quote() -> None:
    """Rewrite the "Time to run" line in each notebook's first cell from the results file."""
    sys.path.insert(0, str(REPO / "tools"))
    from refresh_notebooks import write

    results = json.loads(RESULTS.read_text())
    for name in results["notebooks"]:
        path = NOTEBOOKS / name
        notebook = nbformat.read(path, as_version=4)
        first = notebook.cells[0]
        found = TIME_LINE.search(first.source)
        if not found:
            raise SystemExit(f"{name}: no '**Time to run:**' line in the first cell")
        updated = first.source[: found.start()] + time_line(name, results) + first.source[found.end() :]
        if updated != first.source:
            first.source = updated
            write(notebook, path)
            print(f"quoted in {name}")


def main(prefixes: list[str]) -> None:
    os.environ.update(WORKBOOK_BACKEND="offline", ORT_DISABLE_TELEMETRY="1", AWS_EC2_METADATA_DISABLED="true")
    paths = [p for p in sorted(NOTEBOOKS.glob("*.ipynb")) if not prefixes or p.name[:2] in prefixes]
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"notebooks": {}}
    for path in paths:
        load_before = os.getloadavg()[0]
        figures = run(path)
        figures["load_average_before"] = round(load_before, 2)
        results["notebooks"][path.name] = figures
        print(f"{path.name:40} {figures['wall_seconds']:6.1f} s wall  {figures['cpu_seconds']:6.1f} s CPU  "
              f"(load average before: {load_before:.2f})", flush=True)
    results.update(measured_on=date.today().isoformat(), cores=os.cpu_count(), commit=commit(),
                   python=sys.version.split()[0])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"written: {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    quote() if sys.argv[1:] == ["--quote"] else main(sys.argv[1:])
