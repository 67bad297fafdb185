"""How long the test suite takes, and how many times it executes each notebook.

    .venv/bin/python benchmarks/suite_time.py                 # `make test` three times on the warm venv
    .venv/bin/python benchmarks/suite_time.py --runs 1        # once
    .venv/bin/python benchmarks/suite_time.py --command "make check"

Run it on an idle machine: it reports the machine's core count and load average beside the times. Each run is timed
as a whole process (wall clock, and the processor seconds of the command and everything it started: user + system),
and pytest's own figure is read from its last line. Each run also sets $WORKBOOK_EXECUTIONS_LOG: every notebook run
that reaches its "Check yourself" cell appends a line there (companion/checks/__init__.py), so a run stopped earlier (a
refused parameter, a browser run up to its setup) does not count. The executions per notebook are the distinct
processes that wrote such a line for the notebook's checks module.

Results: benchmarks/results/suite-time.json (the latest run of this script), printed as a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
RESULTS = REPO / "benchmarks" / "results" / "suite-time.json"
PYTEST_LINE = re.compile(r"=+ (?P<summary>.*?) in (?P<seconds>[\d.]+)s")


def checks_modules() -> dict[str, str]:
    """companion.checks.<module> -> the notebook that imports it."""
    found = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        match = re.search(r"from companion\.checks import (\w+)", path.read_text(encoding="utf-8"))
        if match:
            found[f"companion.checks.{match.group(1)}"] = path.stem
    return found


def executions(log: Path) -> dict[str, int]:
    """Per notebook, the distinct processes that reached its Check yourself."""
    names = checks_modules()
    pids: dict[str, set[int]] = defaultdict(set)
    if log.is_file():
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            pids[names.get(entry["checks"], entry["checks"])].add(entry["pid"])
    return {name: len(pids.get(name, set())) for name in names.values()} | {
        other: len(found) for other, found in pids.items() if other not in names.values()}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(command: str) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "executions.jsonl"
        env = {**os.environ, "WORKBOOK_EXECUTIONS_LOG": str(log)}
        load = os.getloadavg()[0]
        started, cpu = time.monotonic(), children_cpu()
        done = subprocess.run(command, shell=True, cwd=REPO, env=env, capture_output=True, text=True)
        wall, used = time.monotonic() - started, children_cpu() - cpu
        tail = [m for m in PYTEST_LINE.finditer(done.stdout)]
        return {"exit": done.returncode, "wall_seconds": round(wall, 1), "cpu_seconds": round(used, 1),
                "pytest_seconds": float(tail[-1].group("seconds")) if tail else None,
                "pytest_summary": tail[-1].group("summary") if tail else done.stdout[-500:],
                "load_average_before": round(load, 2), "executions": executions(log)}


def summarize(runs: list[dict]) -> dict:
    def stats(key: str) -> dict:
        values = [r[key] for r in runs if r[key] is not None]
        return {"min": min(values), "median": statistics.median(values), "max": max(values)} if values else {}

    most = {name: max(r["executions"].get(name, 0) for r in runs) for name in runs[0]["executions"]}
    return {"wall_seconds": stats("wall_seconds"), "pytest_seconds": stats("pytest_seconds"),
            "cpu_seconds": stats("cpu_seconds"), "executions_per_notebook": most}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--command", default="make test")
    args = parser.parse_args(argv)
    runs = []
    for number in range(1, args.runs + 1):
        run = run_once(args.command)
        runs.append(run)
        print(f"run {number}: exit {run['exit']}, {run['wall_seconds']} s wall, pytest {run['pytest_seconds']} s, "
              f"{run['cpu_seconds']} CPU-s ({run['pytest_summary']})", flush=True)
    summary = summarize(runs)
    result = {"command": args.command, "measured_on": date.today().isoformat(), "cores": os.cpu_count(),
              "runs": runs, **summary}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    for key in ("wall_seconds", "pytest_seconds", "cpu_seconds"):
        figures = summary[key]
        if figures:
            print(f"{key:15} min {figures['min']:7.1f}  median {figures['median']:7.1f}  max {figures['max']:7.1f}")
    print("notebook executions per run (the most in any run):")
    for name, count in sorted(summary["executions_per_notebook"].items()):
        print(f"  {name:34} {count}" + ("   ** more than 3 **" if count > 3 else ""))
    print(f"written: {RESULTS.relative_to(REPO)}")
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
