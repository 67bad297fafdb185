"""tools/workbook.py, the set-up without make, run as a learner runs it: `lab` starts the environment's JupyterLab on
notebooks/ and it answers; the plan it prints names Windows' interpreter path on Windows; nothing in it needs a shell.

The JupyterLab started here is the repository's .venv seen through a venv folder of the test's own (its lib/ and share/
are links to .venv's, its stamp is fresh), so the script finds nothing to install and never runs pip."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "workbook.py"


def load_script():
    spec = importlib.util.spec_from_file_location("workbook_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def borrowed_venv(folder: Path) -> Path:
    """A venv folder whose interpreter sees .venv's packages and Jupyter data, with an up-to-date stamp."""
    real = Path(sys.prefix)
    folder.mkdir()
    shutil.copyfile(real / "pyvenv.cfg", folder / "pyvenv.cfg")
    (folder / "bin").mkdir()
    (folder / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    for name in ("lib", "share"):
        (folder / name).symlink_to(real / name, target_is_directory=True)
    (folder / ".installed").touch()
    return folder


@pytest.mark.skipif(os.name == "nt", reason="the borrowed venv uses symbolic links and POSIX paths")
def test_lab_starts_the_environments_jupyterlab_on_the_notebooks_and_stops(tmp_path):
    venv = borrowed_venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "VIRTUAL_ENV"))}
    env.update(JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), IPYTHONDIR=str(tmp_path / "ipython"),
               JUPYTER_TOKEN="workbook-script-test")
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        lab = subprocess.Popen([sys.executable, str(SCRIPT), "lab", "--venv", str(venv), "--", "--no-browser",
                                "--ServerApp.port=0", "--ServerApp.ip=127.0.0.1"],
                               cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url, deadline = None, time.monotonic() + 90
        while url is None and time.monotonic() < deadline and lab.poll() is None:
            time.sleep(0.5)
            found = re.search(r"http://127\.0\.0\.1:(\d+)/lab", log.read_text())
            url = found and f"http://127.0.0.1:{found.group(1)}"
        printed = log.read_text()
        assert url, f"JupyterLab did not start (exit {lab.poll()}):\n{printed[-2000:]}"
        assert "is up to date" in printed and "pip install" not in printed, "nothing was installed"
        assert f"+ {venv}/bin/python -m jupyterlab --ServerApp.root_dir=notebooks" in printed
        listing = None
        while listing is None:  # jupyter_server logs its URL, then listens once its event loop runs: a race
            try:
                with urllib.request.urlopen(f"{url}/api/contents?token=workbook-script-test", timeout=30) as answer:  # noqa: S310
                    listing = answer.read().decode()
            except urllib.error.URLError as refused:
                if not isinstance(refused.reason, ConnectionRefusedError) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert "00_orientation.ipynb" in listing, "the server's root is notebooks/"
        with urllib.request.urlopen(f"{url}/lab?token=workbook-script-test", timeout=30) as answer:  # noqa: S310
            assert answer.status == 200 and "JupyterLab" in answer.read().decode()
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGTERM)  # the script and its JupyterLab (which shuts down on SIGTERM)
            try:
                lab.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(lab.pid, signal.SIGKILL)
                lab.wait()
    assert lab.returncode is not None


def test_the_plan_names_the_windows_interpreter_on_windows(tmp_path, monkeypatch, capsys):
    """On Windows a venv's interpreter is Scripts\\python.exe: every command of the plan (install, kernel, lab) uses it."""
    script = load_script()
    assert script.venv_python(tmp_path / ".venv", windows=True) == tmp_path / ".venv" / "Scripts" / "python.exe"
    assert script.venv_python(tmp_path / ".venv", windows=False) == tmp_path / ".venv" / "bin" / "python"
    monkeypatch.setattr(script, "venv_python", functools.partial(script.venv_python, windows=True))
    assert script.main(["lab", "--dry-run", "--venv", str(tmp_path / ".venv"), "--", "--no-browser"]) == 0
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("+ ") and "copy" not in line]
    expected = str(tmp_path / ".venv" / "Scripts" / "python.exe")
    assert len(commands) == 3 and all(line.startswith(f"+ {expected} -m ") for line in commands), commands
    assert commands[-1].endswith("-m jupyterlab --ServerApp.root_dir=notebooks --allow-root --no-browser")


def test_the_script_runs_no_shell_and_uses_only_the_standard_library():
    source = SCRIPT.read_text(encoding="utf-8")
    assert "shell=True" not in source and "os.system" not in source
    imported = set(re.findall(r"^(?:import|from) (\w+)", source, re.MULTILINE))
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)


def test_arguments_after_the_separator_go_to_jupyter_lab_only(tmp_path):
    plan = subprocess.run([sys.executable, str(SCRIPT), "lab", "--dry-run", "--venv", str(tmp_path / "v"), "--",
                           "--port", "8899"], capture_output=True, text=True)
    assert plan.returncode == 0 and plan.stdout.rstrip().endswith("--allow-root --port 8899"), plan.stdout
    refused = subprocess.run([sys.executable, str(SCRIPT), "test", "--dry-run", "--", "-k", "x"],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "only with `lab`" in refused.stderr


def test_the_learners_venv_skips_byte_compiling_and_the_test_venv_compiles_every_module():
    """make lab's install writes no .pyc files (Python writes those a run imports); make test's compiles all, also
    what an earlier learner install left uncompiled; conda and Binder (--here) keep pip's default."""
    script = load_script()
    learner = script.install_commands("python", [])
    assert "--no-compile" in learner[0] and [c[1:3] for c in learner[1:]] == [["-m", "ipykernel"]]
    tested = script.install_commands("python", ["book", "test"])
    assert "--no-compile" not in tested[0] and tested[1][1] == "-c" and "compileall.compile_dir" in tested[1][2]
    assert "--no-compile" not in script.install_commands("python", [], here=True)[0]
