"""Shared fixtures: a throw-away workspace root, so tests never write into the repository's workspace/."""

from __future__ import annotations

import json
import os
from pathlib import Path

import background
import pytest

REPO = Path(__file__).resolve().parent.parent

# The offline environment (WORKBOOK_BACKEND=offline and the rest) is set by the repository's root conftest.py, which
# pytest loads for every collection, notebooks/ alone included.


@pytest.fixture
def workspace_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("WORKBOOK_WORKSPACE_ROOT", str(root))
    return root.resolve()


def user(text: str) -> dict:
    return {"role": "user", "content": [{"text": text}]}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": [{"text": text}]}


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    """A machine with no AWS configuration at all, as at a workshop without an account."""
    for name in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "WORKBOOK_BACKEND",
        "WORKBOOK_MODEL_ID",
    ]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


@pytest.fixture
def fake_aws(no_aws, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")


@pytest.fixture(scope="session")
def series_replay(tmp_path_factory):
    """The whole series once for the session, and the suite's one whole-series run: the sample class file, on the
    Bedrock path (Strands' real BedrockModel over HTTP to the local Converse endpoint, which refuses what Bedrock
    refuses), answered in the second voice, with every host each process connects to recorded. No AWS credentials.
    Each notebook's run with the sample class's parameters is also the run its exercise tests need for one exercise
    or its smallest accepted values (they read it with notebook_runs.replayed): `work_unit` below keeps every test
    that uses this fixture in one work unit, so xdist runs the replay once, on one worker."""
    from notebook_runs import NO_CREDENTIALS, NOTEBOOKS, SAMPLE, digests, replay_command

    from companion.replay import discover

    out = tmp_path_factory.mktemp("replay") / "sample"
    connections = tmp_path_factory.mktemp("connections") / "hosts.log"
    before = digests(discover(NOTEBOOKS))
    result = replay_command("--class", str(SAMPLE), "--out", str(out), "--backend", "bedrock", "--bedrock-endpoint",
                            "local", "--voice", "paraphrase",
                            env={"WORKBOOK_CONNECT_LOG": str(connections)}, drop=NO_CREDENTIALS)
    return out, result, before, connections


def pytest_terminal_summary(terminalreporter):
    """Print where tests/test_browser.py saved its screenshots (one per notebook), also when it ran on an xdist worker."""
    reports = terminalreporter.getreports("passed") + terminalreporter.getreports("failed")
    folders = sorted({value for report in reports for name, value in report.user_properties if name == "browser screenshots"})
    for folder in folders:
        terminalreporter.write_line(f"browser test screenshots: {folder}")




# --- how `make test` shares the work between its workers (pytest-xdist, `--dist loadgroup`) ------------------------
# (`-n N` alone, xdist's default `--dist load`, gets the same work units: a fixture built once stays built once.)
#
# A work unit goes to one worker and runs there in collection order. The units:
# - a notebook's nbval cells (one kernel, in order): the notebook;
# - every test that uses the class replay (the `series_replay` fixture above, of session scope: tests/test_replay.py
#   and the exercise tests that read a notebook's run with the sample class's parameters), from any module: those
#   tests together (SERIES_REPLAY_UNIT), so the series is replayed once, on one worker;
# - the tests of a module that use a fixture of module or session scope defined in that test module (one JupyterLab,
#   one endpoint, one book build, one exercises' run): those tests together, so the fixture is built once, and in a
#   module not in INDEPENDENT_TEST_MODULES the module's other tests with them, in file order (`units_of`);
# - the other tests of a module not in INDEPENDENT_TEST_MODULES: the module, as before (written to share a process);
# - every other test (a papermill replay, an exercise): on its own, so one module's slow tests spread over the workers.
# The units are handed out slowest first (EXPECTED_SECONDS, measured on 2 cores; a unit not listed counts 0.3 s per
# test), so no long unit starts last while the other worker idles. The workers compute the units (they have the
# tests) and write them to the session's temp folder; the scheduler below (xdist's hook) reads them. xdist's own
# `loadgroup` cannot be used as is: it marks a group by renaming the test, which pytest 9 ignores.

# Modules whose tests each stand alone (their own tmp_path and workspace, a kernel or subprocess of their own).
INDEPENDENT_TEST_MODULES = ("test_exercises_", "test_bad_backend", "test_notebooks_papermill", "test_replay",
                            "test_offline_install", "test_telemetry", "test_series_map", "test_offline_guard")

# Seconds a unit takes on the 2-core machine (the longest pattern that starts the unit's name wins).
EXPECTED_SECONDS = {
    "tests/test_browser.py": 170,  # JupyterLab and Chromium: every notebook up to its setup cell or slider
    "tests/test_replay.py::series_replay": 200,  # the class replay (the whole series) and every test reading it
    "tests/test_offline_install.py::shared": 60,  # a venv built from the wheel folder, notebook 00 run in it
    "tests/test_book.py::shared": 15,  # the book's Sphinx build (about 9 s) and the checks of its pages, each parsed once
    "tests/test_replay.py::test_sigterm": 30,
    "tests/test_replay.py::test_interrupting": 30,
    "tests/test_offline_guard.py::test_a_shell_asking": 25,
    "notebooks/": 25,  # a notebook's nbval run
    "tests/test_exercises_01.py::shared": 45,  # the exercises' run of notebook 01 and its writer processes
    "tests/test_exercises_": 15,  # an exercises' run of a notebook (a refusal, in the shared kernel: under a second)
    "tests/test_telemetry.py": 1,  # its 30-second process runs in the background from the start of the session
}
UNITS_FILE = "work-units.json"
WORK_UNIT_MODES = ("load", "loadgroup")  # xdist's --dist values the work units replace
DIST_KEY = "workbook_dist"  # the controller's --dist, passed to each worker (a worker of `-n N` alone reads "no")
SERIES_REPLAY_UNIT = "tests/test_replay.py::series_replay"


def _shares_a_fixture(item) -> bool:
    """Whether `item` uses a fixture of module, package or session scope that its own test module defines."""
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    module = getattr(getattr(item, "module", None), "__name__", None)
    return any(d[-1].scope in ("module", "package", "session") and getattr(d[-1].func, "__module__", "") == module
               for d in definitions.values())


def work_unit(item) -> str:
    """The work unit `item` belongs to (its own node id for a test that may run on any worker by itself)."""
    path = item.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        return path
    if "series_replay" in getattr(item, "fixturenames", ()):
        return SERIES_REPLAY_UNIT
    if _shares_a_fixture(item):
        return f"{path}::shared"
    return item.nodeid if Path(path).stem.startswith(INDEPENDENT_TEST_MODULES) else path


def units_of(items) -> dict[str, list]:
    """Each work unit's tests, in collection order. A module some of whose tests share a module-scoped fixture runs
    whole, in one unit and in file order: split in two, its other tests could run on the same worker while the
    fixture still lives (test_local_aws's endpoint, of which a process may run only one), which file order avoids."""
    plain = [work_unit(item) for item in items]
    shared = {unit.removesuffix("::shared") for unit in plain if unit.endswith("::shared")}
    units: dict[str, list] = {}
    for item, unit in zip(items, plain):
        units.setdefault(f"{unit}::shared" if unit in shared else unit, []).append(item)
    return units


def expected_seconds(unit: str, tests: int) -> float:
    matches = [pattern for pattern in EXPECTED_SECONDS if unit.startswith(pattern)]
    return EXPECTED_SECONDS[max(matches, key=len)] if matches else 0.3 * tests


# Tests that start a notebook kernel, a JupyterLab, a browser, a Sphinx build or a venv: marked `notebooks`, so that
# `make check` (`-m "not notebooks"`) is the fast inner loop and `make test` runs everything.
NOTEBOOK_TEST_MODULES = ("test_exercises_", "test_notebooks_papermill", "test_refusals", "test_replay", "test_bad_backend", "test_browser",
                         "test_offline_install", "test_book", "test_telemetry", "test_offline_guard")
NOTEBOOK_TESTS = ("tests/test_series_map.py::test_template_runs_and_has_the_shape",)


# Tests that start processes or servers (the restart runner, two writers, the local S3, DynamoDB and Converse
# endpoints, SIGKILLed forgets) or load the embedding model: marked `integration`; `make check` leaves them out too.
INTEGRATION_TEST_MODULES = ("test_bedrock_local", "test_forgetting_lineage", "test_local_aws", "test_forgetting",
                            "test_poisoning_voices", "test_aws", "test_vector_recall_explain", "test_restart_runner",
                            "test_vector_recall", "test_two_writers", "test_consolidation", "test_cloud_lineage",
                            "test_store_locking", "test_shredding", "test_s3_hardening", "test_crash_repair",
                            "test_shared_store", "test_workbook_script", "test_episodic", "test_vector_lineage",
                            "test_selective_memory", "test_model_calls", "test_context_managers")


def runs_notebooks(item) -> bool:
    path = item.nodeid.split("::", 1)[0]
    return (path.endswith(".ipynb") or Path(path).stem.startswith(NOTEBOOK_TEST_MODULES)
            or item.nodeid.startswith(NOTEBOOK_TESTS))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the tests that run notebooks; on an xdist worker under `--dist loadgroup` (or `load`), also order the tests
    unit by unit, slowest first, and write the units."""
    for item in items:
        if runs_notebooks(item):
            item.add_marker(pytest.mark.notebooks)
        elif Path(item.nodeid.split("::", 1)[0]).stem.startswith(INTEGRATION_TEST_MODULES):
            item.add_marker(pytest.mark.integration)
    if not (hasattr(config, "workerinput") and config.workerinput.get(DIST_KEY) in WORK_UNIT_MODES):
        return
    units = units_of(items)
    slowest_first = sorted(units.items(), key=lambda entry: -expected_seconds(entry[0], len(entry[1])))  # stable
    items[:] = [item for _, members in slowest_first for item in members]
    target = background.shared_folder(config) / UNITS_FILE
    part = target.with_name(f"{UNITS_FILE}.{config.workerinput['workerid']}")
    part.write_text(json.dumps({item.nodeid: unit for unit, members in slowest_first for item in members}))
    os.replace(part, target)  # every worker writes the same map; a reader sees one whole


@pytest.hookimpl(optionalhook=True)  # optional: pytest-xdist may not be installed
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores. Much of a notebook test is waiting (a kernel starting, a subprocess,
    a server), so a third worker on two cores fills that time; benchmarks/suite_time.py measures the difference."""
    return (os.cpu_count() or 1) + 1


@pytest.hookimpl(optionalhook=True)  # optional: pytest-xdist may not be installed
def pytest_configure_node(node):
    """Tell each worker the controller's --dist: `-n N` alone selects `load` on the controller only."""
    node.workerinput[DIST_KEY] = node.config.getvalue("dist")


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: pytest-xdist may not be installed
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (or `load`): xdist's scope scheduler, with the scopes the workers wrote and in their order."""
    if config.getvalue("dist") not in WORK_UNIT_MODES:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnitScheduling(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False  # keep the order the workers chose (slowest first)
            self.units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:  # read once the workers have collected (the scheduler asks only then)
                path = background.shared_folder(self.config) / UNITS_FILE
                self.units = json.loads(path.read_text()) if path.exists() else {}
            return self.units.get(nodeid) or self.units.get(nodeid.rsplit("@", 1)[0]) or nodeid.rsplit("::", 1)[0]

    return WorkUnitScheduling(config, log)



def pytest_collection_finish(session):
    """Start the long, mostly idle processes that collected test modules declare (tests/background.py) now."""
    if not session.config.option.collectonly:
        background.start_declared(session)

# --- what each test costs in CPU (opt-in) -------------------------------------------------------------------------------
# On 2 cores the suite is bound by CPU, not by waiting: --durations shows wall time, which depends on what else runs.
# With WORKBOOK_TEST_CPU=<file>, each test appends one JSON line: its node id, wall seconds, and the CPU seconds of the
# worker and of the processes it started and waited for (kernels, subprocesses).
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    target = os.environ.get("WORKBOOK_TEST_CPU")
    if not target:
        yield
        return
    import resource
    import time

    def cpu(who):
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    started, own, children = time.monotonic(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    yield
    line = {"test": item.nodeid, "wall": round(time.monotonic() - started, 2),
            "cpu": round(cpu(resource.RUSAGE_SELF) - own, 2), "children": round(cpu(resource.RUSAGE_CHILDREN) - children, 2)}
    with open(target, "a") as out:
        out.write(json.dumps(line) + "\n")
