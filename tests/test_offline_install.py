"""SLOW (about 1-3 minutes; the download step more on a first run): the conference-Wi-Fi install. (The refusals at
the end are fast: bad wheel folders and a --venv that is not a venv.)

A venv is built from a folder of wheels with the network unused: pip gets `--no-index`, an empty index URL and no
configuration file (this machine's pip.conf names local wheel folders), and, where the system allows it (root with
`unshare`), the install runs in a network namespace of its own that has no network at all. Notebook 00 then runs in
that venv, from a copy of the workbook, and its claims ledger must hold with its kernel in the new venv. The venv
and the copy are deleted at the end.

The folder of wheels comes from $WORKBOOK_WHEELHOUSE if set; else from a cache (~/.cache/agent-memory-workbook/),
filled once per set of pins by `tools/wheelhouse.py download` (this step needs the package registry, as `make test`'s
own set-up does; without it the test skips, except in CI where it fails).
"""

from __future__ import annotations

import hashlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import companion

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))
import wheelhouse  # noqa: E402  (tools/ is not a package)

# What a learner's copy of the workbook needs to install the package and run notebook 00.
COPIED = ["pyproject.toml", "constraints.txt", "README.md", "companion", "data", "tools/jupyterlab-overrides.json", "tools/wheelhouse.py",
          "notebooks/00_orientation.ipynb"]


def offline_env(home: Path) -> dict[str, str]:
    """The environment minus pip's and Jupyter's settings, with pip pointed at nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "JUPYTER", "VIRTUAL_ENV", "PYTHON"))}
    empty_index = home / "empty-index"
    empty_index.mkdir(exist_ok=True)
    env.update(
        PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_INDEX_URL=empty_index.as_uri(), PIP_NO_CACHE_DIR="1",
        JUPYTER_DATA_DIR=str(home / "jupyter-data"), JUPYTER_CONFIG_DIR=str(home / "jupyter-config"), IPYTHONDIR=str(home / "ipython"),
        WORKBOOK_BACKEND="offline", ORT_DISABLE_TELEMETRY="1", AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def without_network(command: list[str], loopback: bool = False) -> list[str]:
    """The command in a network namespace of its own (no interface but loopback), when unshare is usable here."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        return command
    if loopback:  # a kernel talks to nbconvert over ZeroMQ on 127.0.0.1, down by default in a new namespace
        if shutil.which("ip") is None:
            return command
        return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
    return ["unshare", "-n", *command]


@pytest.fixture(scope="module")
def wheel_folder() -> Path:
    given = os.environ.get("WORKBOOK_WHEELHOUSE")
    if given:
        return Path(given)
    pins = hashlib.sha256()
    for name in ("pyproject.toml", "constraints.txt"):
        pins.update((REPO_ROOT / name).read_bytes())
    folder = Path.home() / ".cache" / "agent-memory-workbook" / f"wheelhouse-{pins.hexdigest()[:12]}"
    if not (folder / "README.txt").exists():
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "wheelhouse.py"), "download", "--dest", str(folder)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            message = f"the wheel download failed (no registry?): {result.stderr.strip().splitlines()[-1:]}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        print(f"downloaded the wheels in {time.monotonic() - started:.0f} s: {result.stdout.strip()}")
        for stale in folder.parent.glob("wheelhouse-*"):
            if stale != folder:
                shutil.rmtree(stale, ignore_errors=True)
    return folder


@pytest.mark.slow
def test_a_venv_built_from_the_wheel_folder_alone_runs_notebook_00(wheel_folder):
    home = Path(tempfile.mkdtemp(prefix="offline-install-"))
    try:
        copy = home / "workbook"
        for name in COPIED:
            source, target = REPO_ROOT / name, copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, target)
        env = offline_env(home)
        venv = home / "venv"

        started = time.monotonic()
        install = subprocess.run(
            without_network([sys.executable, "tools/wheelhouse.py", "install", "--from", str(wheel_folder), "--venv", str(venv),
                             "--no-compile"]),  # .pyc files are no part of what is checked, and writing them costs CPU
            cwd=copy, env=env, capture_output=True, text=True,
        )
        assert install.returncode == 0, install.stdout + install.stderr
        installed_in = time.monotonic() - started

        # Notebook 00 up to its second agent (the lesson's first run: the full notebook runs under nbval, its
        # exercises and the class replay), then a probe that imports every module of the companion, and with them
        # every package the notebooks import through it.
        probe = {"cell_type": "code", "execution_count": None, "id": "offline-install-probe", "metadata": {}, "outputs": [],
                 "source": "import importlib, pkgutil, sys, companion\nprint('PREFIX', sys.prefix)\n"
                           "print('COMPANION', companion.__file__)\n"
                           "names = [m.name for m in pkgutil.walk_packages(companion.__path__, 'companion.')]\n"
                           "for name in names:\n    importlib.import_module(name)\n"
                           "print('IMPORTED', len(names), 'companion modules')"}
        notebook_path = copy / "notebooks" / "00_orientation.ipynb"
        notebook = json.loads(notebook_path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
        stranger = next(i for i, c in enumerate(cells) if c["cell_type"] == "code" and "stranger = Agent(" in "".join(c["source"]))
        notebook["cells"] = cells[: stranger + 1] + [probe]
        notebook_path.write_text(json.dumps(notebook), encoding="utf-8")
        started = time.monotonic()
        run = subprocess.run(
            without_network([str(venv / "bin" / "jupyter"), "nbconvert", "--to", "notebook", "--execute", "--output", "executed.ipynb",
                             "--ExecutePreprocessor.timeout=300", str(notebook_path)], loopback=True),
            cwd=copy / "notebooks", env=env, capture_output=True, text=True,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        ran_in = time.monotonic() - started

        executed = json.loads((copy / "notebooks" / "executed.ipynb").read_text(encoding="utf-8"))
        outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
        printed = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
        assert not [o for o in outputs if o["output_type"] == "error"]
        assert "agent: Your name is Pin and your favorite number is 42." in printed, "the offline model answered"
        assert "stranger: I cannot see your name" in printed, "and the second agent could not"
        assert f"PREFIX {venv}" in printed, "the notebook's kernel was not the new venv's Python"
        assert f"COMPANION {copy}" in printed, "companion was not imported from the installed copy"
        expected = len(list(pkgutil.walk_packages(companion.__path__, "companion.")))
        assert f"IMPORTED {expected} companion modules" in printed, "every companion module imports in the install"
        assert "strands-agents 1.62.0" in printed
        site = next((venv / "lib").glob("python3*/site-packages"))
        installed = {wheelhouse._name(p.name.split("-")[0]) for p in site.glob("*.dist-info")}
        assert not installed & {"pytest", "nbval", "ruff", "pytest-xdist", "playwright"}, sorted(installed)
        folder_mb, venv_mb = (wheelhouse.megabytes(wheelhouse.folder_size(p)) for p in (wheel_folder, venv))
        print(f"wheel folder {folder_mb}, venv {venv_mb}; install {installed_in:.0f} s, notebook 00 {ran_in:.0f} s")
    finally:
        shutil.rmtree(home, ignore_errors=True)


# --- refusals: one message, exit status 2, nothing written ------------------------------------------------------------


def wheelhouse_install(tmp_path: Path, source: Path, venv: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "wheelhouse.py"), "install", "--from", str(source),
                           "--venv", str(venv)], cwd=REPO_ROOT, env=offline_env(tmp_path), capture_output=True, text=True,
                          timeout=120)


def placeholder_wheels(folder: Path, names: list[str]) -> Path:
    """Files named as wheels of these distributions (enough for the checks made before pip runs)."""
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / f"{name.replace('-', '_')}-1.0-py3-none-any.whl").write_bytes(b"PK\x05\x06" + bytes(18))
    return folder


def test_an_empty_or_incomplete_wheel_folder_is_named_and_nothing_is_built(tmp_path):
    venv = tmp_path / "venv"
    (tmp_path / "empty").mkdir()
    for source, expected in [(tmp_path / "empty", "holds no wheels"), (tmp_path / "absent", "does not exist")]:
        done = wheelhouse_install(tmp_path, source, venv)
        assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr, done.stderr
    partial = placeholder_wheels(tmp_path / "partial", ["boto3", "numpy", "setuptools"])
    done = wheelhouse_install(tmp_path, partial, venv)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "CalledProcessError" not in done.stderr, done.stderr
    (message,) = done.stderr.strip().splitlines()
    assert f"the wheel folder {partial} is incomplete: no wheel for " in message and "strands-agents" in message
    assert "pyyaml" in message and "boto3" not in message and "numpy" not in message, message
    assert not venv.exists(), "no venv was created for an install that cannot finish"


def test_a_venv_folder_that_is_not_a_venv_is_refused_before_anything_is_written(tmp_path):
    complete = placeholder_wheels(tmp_path / "wheels", [r.split("==")[0].split(">=")[0] for r in wheelhouse.requirements([])])
    folder = tmp_path / "my-project"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    done = wheelhouse_install(tmp_path, complete, folder)
    assert done.returncode == 2 and "is not a virtual environment" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"], "nothing was written inside it"
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    done = wheelhouse_install(tmp_path, complete, a_file)
    assert done.returncode == 2 and "is a file, not a virtual environment" in done.stderr, done.stderr


PIP_OUTPUT = """ERROR: Could not find a version that satisfies the requirement jmespath<2.0.0,>=0.7.1 (from boto3) (from versions: none)
ERROR: No matching distribution found for jmespath<2.0.0,>=0.7.1
"""


def test_a_wheel_pip_cannot_find_is_named_without_a_traceback(tmp_path, monkeypatch, capsys):
    """A dependency of a dependency missing from the folder: pip's failure becomes one message naming it (it was pip's
    error, then a raw CalledProcessError). pip itself is a stand-in here, answering as pip does."""
    complete = placeholder_wheels(tmp_path / "wheels", [r.split("==")[0].split(">=")[0] for r in wheelhouse.requirements([])])
    calls = []

    def run(command, check=False, **kwargs):
        calls.append(command)
        code, stderr = (1, PIP_OUTPUT) if command[1:4] == ["-m", "pip", "install"] else (0, "")
        if check and code:
            raise subprocess.CalledProcessError(code, command, "", stderr)
        return subprocess.CompletedProcess(command, code, "", stderr)

    monkeypatch.setattr(wheelhouse.subprocess, "run", run)
    status = wheelhouse.main(["install", "--from", str(complete), "--venv", str(tmp_path / "venv")])
    error = capsys.readouterr().err
    assert status == 2, error
    assert error.strip() == (f"wheelhouse: the wheel folder {complete} is incomplete: pip found no wheel there for "
                             "jmespath<2.0.0,>=0.7.1 (needed by the workbook's dependencies). Download the folder again "
                             "with the network (`make wheelhouse`) on a machine like this one")
    assert [c[1:4] for c in calls] == [["-m", "venv", str(tmp_path / "venv")], ["-m", "pip", "install"]], "stopped after pip"
