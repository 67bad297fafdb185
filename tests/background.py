"""A long, mostly idle process a test needs (the telemetry test's 30 seconds of embedding), started once when the test
session starts and run beside the other tests, so no worker sits waiting on it; the test then reads its result.

A test module declares it with `BACKGROUND = {"name": function(folder) -> dict of subprocess.Popen arguments}`
(args, cwd, env; `folder` is the run's own empty folder). tests/conftest.py starts every declared process of the
modules whose tests were collected (once for the session, whichever xdist worker gets there first), and a fixture
calls `result(config, name)`: it waits for the process (starting it there if nothing started it before) and returns
its folder, exit status, stdout and stderr. The process is the same as a direct run; only the waiting overlaps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Runs the command with its output in files and writes its exit status last: the result is on disk even when the
# worker that started it has ended, and a reader knows it is complete when status.json exists.
RUNNER = """
import json, subprocess, sys
spec = json.loads(open(sys.argv[1]).read())
with open(spec["stdout"], "w") as out, open(spec["stderr"], "w") as err:
    code = subprocess.run(spec["args"], cwd=spec["cwd"], env=spec["env"], stdout=out, stderr=err).returncode
with open(spec["status"] + ".part", "w") as status:
    status.write(json.dumps({"returncode": code}))
import os; os.replace(spec["status"] + ".part", spec["status"])
"""


def shared_folder(config: pytest.Config) -> Path:
    """A folder every xdist worker of this session sees (the parent of a worker's own basetemp), or the basetemp."""
    base = config._tmp_path_factory.getbasetemp()  # noqa: SLF001 (the factory behind the tmp_path_factory fixture)
    return base.parent if hasattr(config, "workerinput") else base


def start(config: pytest.Config, name: str, popen_arguments) -> bool:
    """Start the process `name` unless this session already did (True when this call started it)."""
    root = shared_folder(config) / f"background-{name}"
    root.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(root / "claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    folder = root / "run"
    folder.mkdir()
    arguments = popen_arguments(folder)
    spec = {"args": [str(a) for a in arguments["args"]], "cwd": str(arguments.get("cwd", folder)),
            "env": dict(arguments.get("env", os.environ)), "stdout": str(root / "stdout"), "stderr": str(root / "stderr"),
            "status": str(root / "status.json")}
    (root / "spec.json").write_text(json.dumps(spec))
    subprocess.Popen([sys.executable, "-c", RUNNER, str(root / "spec.json")], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True


def result(config: pytest.Config, name: str, popen_arguments, timeout: float) -> dict:
    """Wait for the process `name` (started now if it was not) and return its folder, returncode, stdout, stderr."""
    start(config, name, popen_arguments)
    root = shared_folder(config) / f"background-{name}"
    deadline = time.monotonic() + timeout
    while not (root / "status.json").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the background process {name!r} did not finish within {timeout} s ({root})")
        time.sleep(0.2)
    status = json.loads((root / "status.json").read_text())
    return {"folder": root / "run", "returncode": status["returncode"], "stdout": (root / "stdout").read_text(),
            "stderr": (root / "stderr").read_text()}


def start_declared(session: pytest.Session) -> None:
    """Start the BACKGROUND processes of every module that has a collected test (tests/conftest.py calls this)."""
    modules = {id(m): m for m in (getattr(item, "module", None) for item in session.items) if hasattr(m, "BACKGROUND")}
    for module in modules.values():
        for name, popen_arguments in module.BACKGROUND.items():
            start(session.config, name, popen_arguments)
