"""tests/conftest.py's work units: every test that reads the class replay (the session's `series_replay`) is in one
unit, so xdist replays the series once, on one worker, and the exercise tests that read it wait for no second replay.
Nothing here is timed: benchmarks/suite_time.py measures the suite, and counts each notebook's executions."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import conftest
from conftest import EXPECTED_SECONDS, SERIES_REPLAY_UNIT, expected_seconds, work_unit

TESTS = Path(__file__).resolve().parent


def readers_of_the_replay() -> list[str]:
    """The node ids (without parameters) of the test functions that take `series_replay`."""
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and \
                    "series_replay" in [argument.arg for argument in node.args.args]:
                found.append(f"tests/{path.name}::{node.name}")
    return found


def test_every_test_reading_the_class_replay_is_in_one_work_unit():
    readers = readers_of_the_replay()
    modules = {nodeid.split("::")[0] for nodeid in readers}
    assert "tests/test_replay.py" in modules and any("test_exercises_" in m for m in modules), modules
    for nodeid in readers:
        item = SimpleNamespace(nodeid=nodeid, fixturenames=["request", "series_replay"])
        assert work_unit(item) == SERIES_REPLAY_UNIT, nodeid
    assert expected_seconds(SERIES_REPLAY_UNIT, len(readers)) == EXPECTED_SECONDS[SERIES_REPLAY_UNIT]


def test_an_exercise_test_of_its_own_stays_a_unit_of_its_own():
    nodeid = "tests/test_exercises_03.py::test_exercise_2_odd_window_is_refused_before_the_workspace_is_reset"
    assert work_unit(SimpleNamespace(nodeid=nodeid, fixturenames=["tmp_path", "workspace_root"])) == nodeid


def test_a_module_whose_tests_share_a_fixture_runs_whole_in_file_order(monkeypatch):
    """test_local_aws's first tests start an endpoint of their own, the later ones share the module's: split into
    two units, the shared one could run first on a worker and leave its endpoint running for the others."""
    names = ["tests/test_local_aws.py::test_own_endpoint", "tests/test_local_aws.py::test_uses_local",
             "tests/test_local_aws.py::test_no_endpoint", "tests/test_other.py::test_alone"]
    monkeypatch.setattr(conftest, "work_unit", lambda item: "tests/test_local_aws.py::shared"
                        if "uses_local" in item.nodeid else item.nodeid.split("::")[0])
    units = conftest.units_of([SimpleNamespace(nodeid=name) for name in names])
    assert list(units) == ["tests/test_local_aws.py::shared", "tests/test_other.py"]
    assert [item.nodeid for item in units["tests/test_local_aws.py::shared"]] == names[:3]
