"""Set up, open and test the workbook without `make`: the same steps as the Makefile, on Linux, macOS and Windows.

    python tools/workbook.py lab      # = make lab: create .venv if needed, install the pins, open JupyterLab
    python tools/workbook.py test     # = make test: the same, plus the test tools, then the whole test suite
    python tools/workbook.py setup    # = make env: only the install (what `lab` and `test` do first)
    python tools/workbook.py setup --here   # into the Python running this script (conda, Binder, a dev container)
    python tools/workbook.py lab -- --no-browser --port 8899   # anything after `--` goes to `jupyter lab`
    python tools/workbook.py lab --dry-run  # print every command (install, kernel, settings, lab), run nothing

The Makefile calls this script for its install step, so the two routes cannot drift apart: the pinned packages
(`pip install -c constraints.txt -e .`), the workbook's Jupyter kernel `agent-memory` registered inside the
environment with ORT_DISABLE_TELEMETRY=1, and the JupyterLab settings in tools/jupyterlab-overrides.json (autosave off,
no news or update checks, no widget state saved). The learner's install (`setup`, `lab`) is pyproject.toml's
dependencies only; `test` adds the `test` and `book` extras (pytest, nbval, ruff, the book's Sphinx). Only the standard
library is used, and every command is a list run without a shell, so any Python 3.11+ runs it, on Windows too (the
venv's interpreter is then `.venv\\Scripts\\python.exe`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import venv as venv_module
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
KERNEL = "agent-memory"
KERNEL_DISPLAY_NAME = "Agent memory (workbook)"
OVERRIDES = REPO_ROOT / "tools" / "jupyterlab-overrides.json"
# What every test run sets, whatever the shell says (the Makefile's OFFLINE line): no paid calls, no telemetry, no
# probe of the EC2 metadata address by botocore looking for credentials.
OFFLINE_ENV = {"WORKBOOK_BACKEND": "offline", "ORT_DISABLE_TELEMETRY": "1", "AWS_EC2_METADATA_DISABLED": "true"}
PYTEST_ARGS = [
    "tests", "notebooks", "--ignore=notebooks/es", "--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
    "--nbval-cell-timeout=300", "-p", "no:cacheprovider", "-v", "-n", "auto", "--dist", "loadgroup", "--durations=25",
]


class SetupError(SystemExit):
    """A set-up step that cannot go on; the message says what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(f"workbook setup: {message}")


def venv_python(venv: Path, windows: bool | None = None) -> Path:
    """The interpreter of a venv, on POSIX (bin/python) and Windows (Scripts/python.exe)."""
    on_windows = venv / "Scripts" / "python.exe"
    if windows is None:
        windows = os.name == "nt" or on_windows.exists()
    return on_windows if windows else venv / "bin" / "python"


def ensure_venv(venv: Path) -> Path:
    """Create the venv with the Python running this script unless one is there; refuse a folder that is not a venv."""
    check_python()
    if venv.exists() and not (venv / "pyvenv.cfg").exists():
        raise SetupError(f"{venv} exists but is not a virtual environment (no pyvenv.cfg): move it away or name another")
    if not venv.exists():
        venv_module.create(venv, with_pip=True)
    return venv_python(venv)


# The learner's venv skips pip's byte-compiling: about 190 MiB of .pyc files, one for every module of every package,
# where a run of the whole series and of JupyterLab imports about 55 MiB of them. Python writes those on first import:
# the first notebook run once took 39 s instead of 20 s on the project's loaded 2-core machine, and pip's install used
# about 30 s less CPU (38 s instead of 68 s). With the test extra every module is compiled (pip, then compileall for what an earlier learner
# install left uncompiled): the suite starts hundreds of kernels, and where PYTHONDONTWRITEBYTECODE is set nothing
# would be written. An environment that is not the workbook's own venv (--here: conda, Binder) keeps pip's default.
COMPILE_ALL = ("import compileall, sysconfig; "
               "[compileall.compile_dir(p, quiet=1, workers=0) for p in {sysconfig.get_path(n) for n in ('purelib', 'platlib')}]")


def install_commands(python: Path | str, extras: list[str], *, here: bool = False) -> list[list[str]]:
    """The pip, compile and ipykernel commands of the install, in order (also what `--dry-run` prints)."""
    target = "-e ." if not extras else f"-e .[{','.join(extras)}]"
    compile_ = here or "test" in extras
    commands = [
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         *([] if compile_ else ["--no-compile"]), "-c", "constraints.txt", *target.split(" ", 1)],
    ]
    if "test" in extras:
        commands.append([str(python), "-c", COMPILE_ALL])
    commands.append([str(python), "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL, "--display-name",
                     KERNEL_DISPLAY_NAME, "--env", "ORT_DISABLE_TELEMETRY", "1"])
    return commands


def settings_dir(prefix: Path) -> Path:
    """Where JupyterLab of the environment at `prefix` reads overrides.json."""
    return prefix / "share" / "jupyter" / "lab" / "settings"


INPUTS = [REPO_ROOT / "pyproject.toml", REPO_ROOT / "constraints.txt", OVERRIDES]


def stamp_of(venv: Path, extras: list[str]) -> Path:
    """The Makefile's stamps: .venv/.installed for the learner's install, .installed-test with the test extras."""
    return venv / (".installed-test" if "test" in extras else ".installed")


def up_to_date(stamp: Path) -> bool:
    """A stamp newer than everything the install reads: nothing to do (as make decides)."""
    return stamp.exists() and all(stamp.stat().st_mtime >= p.stat().st_mtime for p in INPUTS)


def setup(python: Path | str, prefix: Path, extras: list[str], *, dry_run: bool = False, here: bool = False) -> None:
    """Install the pins (and extras), register the kernel and copy the JupyterLab settings into `python`'s env."""
    for command in install_commands(python, extras, here=here):
        print("+", " ".join(command), flush=True)
        if not dry_run:
            result = subprocess.run(command, cwd=REPO_ROOT)
            if result.returncode != 0:
                raise SetupError(f"`{' '.join(command[1:4])[:60]}` failed (exit {result.returncode}); its output is above")
    target = settings_dir(prefix) / "overrides.json"
    print(f"+ copy {OVERRIDES.relative_to(REPO_ROOT)} -> {target}", flush=True)
    if not dry_run:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(OVERRIDES, target)


def lab_command(python: Path | str, jupyter_args: list[str]) -> list[str]:
    """What `make lab` runs: the environment's JupyterLab on notebooks/ (plus whatever was given after `--`); the module,
    not the `jupyter` command, so no console script needs to be on the PATH."""
    return [str(python), "-m", "jupyterlab", "--ServerApp.root_dir=notebooks", "--allow-root", *jupyter_args]


def test_command(python: Path | str) -> list[str]:
    """What `make test` runs, in the offline environment OFFLINE_ENV."""
    return [str(python), "-m", "pytest", *PYTEST_ARGS]


def check_python() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 (this script may be started by an older Python: say so)
        raise SetupError(f"Python 3.11 or newer is needed (this is {sys.version.split()[0]}); run this script with it")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["setup", "lab", "test"])
    parser.add_argument("--venv", type=Path, default=REPO_ROOT / ".venv", help="the virtual environment (.venv)")
    parser.add_argument("--here", action="store_true", help="install into the Python running this script, no venv")
    parser.add_argument("--extras", default="", help="comma-separated extras to add (test,book); `test` adds both")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.epilog = "lab only: arguments after `--` go to `jupyter lab` (e.g. -- --no-browser --port 8899)"
    argv = list(sys.argv[1:] if argv is None else argv)
    jupyter_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if jupyter_args and args.command != "lab":
        parser.error(f"arguments after `--` go to `jupyter lab`, so only with `lab`; got {' '.join(jupyter_args)}")

    extras = [e for e in args.extras.split(",") if e]
    if args.command == "test":
        extras = sorted(set(extras) | {"test", "book"})
    if args.here:
        check_python()
        python = Path(sys.executable)
    else:
        python = venv_python(args.venv) if args.dry_run else ensure_venv(args.venv)
    stamp = None if args.here else stamp_of(args.venv, extras)
    if stamp is not None and up_to_date(stamp) and not args.dry_run:
        print(f"{args.venv} is up to date ({stamp.name} is newer than the pins): nothing to install")
    else:
        setup(python, Path(sys.prefix) if args.here else args.venv.resolve(), extras, dry_run=args.dry_run,
              here=args.here)
        if stamp is not None and not args.dry_run:
            stamp.touch()
            if stamp.name != ".installed":  # the learner's install is part of it, as `make test` touches both
                (args.venv / ".installed").touch()
    if args.command == "setup":
        return 0
    if args.command == "lab":
        command, env = lab_command(python, jupyter_args), {**os.environ, "ORT_DISABLE_TELEMETRY": "1"}
    else:
        if sys.platform.startswith("linux") and not os.access("/usr/bin/chromium", os.X_OK):  # as the Makefile says
            print("No Chromium at /usr/bin/chromium (Debian: apt-get install chromium): the browser test will be skipped.")
        command, env = test_command(python), {**os.environ, **OFFLINE_ENV}
    print("+", " ".join(command), flush=True)
    if args.dry_run:
        return 0
    return subprocess.call(command, cwd=REPO_ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
