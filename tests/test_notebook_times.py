"""Each notebook's "Time to run" line quotes a measurement: benchmarks/notebook_times.py's results file.

The times themselves are not asserted (speed depends on the machine: the benchmark reports it); what is checked is that
no notebook states a time the results file does not hold, and that the results cover every notebook.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
spec = importlib.util.spec_from_file_location("notebook_times", REPO / "benchmarks" / "notebook_times.py")
notebook_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(notebook_times)
RESULTS = json.loads(notebook_times.RESULTS.read_text())


def test_the_results_cover_every_notebook_and_say_where_they_were_measured():
    assert sorted(RESULTS["notebooks"]) == [p.name for p in NOTEBOOKS]
    assert RESULTS["cores"] and RESULTS["measured_on"]
    for name, figures in RESULTS["notebooks"].items():
        assert 0 < figures["wall_seconds"] and 0 < figures["cpu_seconds"], name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_time_to_run_line_quotes_the_results(path):
    first = nbformat.read(path, as_version=4).cells[0].source
    lines = notebook_times.TIME_LINE.findall(first)
    assert len(lines) == 1, "one '**Time to run:**' line in the first cell"
    assert lines[0] == notebook_times.time_line(path.name, RESULTS), (
        "run `.venv/bin/python benchmarks/notebook_times.py --quote` after measuring")


def test_about_rounds_as_a_learner_would_read_it():
    assert notebook_times.about(3.2) == "about 5 seconds"
    assert notebook_times.about(13.4) == "about 15 seconds"
    assert notebook_times.about(118) == "about 120 seconds"
    assert notebook_times.about(125) == "about 2 minutes"
    assert notebook_times.about(170) == "about 3 minutes"
