"""Set up, open and test the workbook without `make`: the same steps as the Makefile, on Linux, macOS and Windows.

    python tools/workbook.py lab      # = make lab: create .venv if needed, install the pins, open JupyterLab
    python tools/workbook.py test     # = make test: the same, plus the test tools, then the whole test suite
    python tools/workbook.py setup    # = make env: only the install (what `lab` and `test` do first)
    python tools/workbook.py setup --here   # into the Python running this script (conda, Binder, a dev container)

The Makefile calls this script for its install step, so the two routes cannot drift apart: the pinned packages
(`pip install -c constraints.txt -e .`), the workbook's Jupyter kernel `agent-memory` registered inside the
environment with ORT_DISABLE_TELEMETRY=1, and the JupyterLab settings in tools/jupyterlab-overrides.json (autosave off,
no news or update checks, no widget state saved). Only the standard library is used, so any Python 3.11+ runs it.
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
    "tests", "notebooks", "--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
    "--nbval-cell-timeout=300", "-p", "no:cacheprovider", "-v", "-n", "auto", "--dist", "loadscope",
]


class SetupError(SystemExit):
    """A set-up step that cannot go on; the message says what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(f"workbook setup: {message}")


def venv_python(venv: Path) -> Path:
    """The interpreter of a venv, on POSIX (bin/python) and Windows (Scripts/python.exe)."""
    windows = venv / "Scripts" / "python.exe"
    return windows if windows.exists() or os.name == "nt" else venv / "bin" / "python"


def ensure_venv(venv: Path) -> Path:
    """Create the venv with the Python running this script unless one is there; refuse a folder that is not a venv."""
    if sys.version_info < (3, 11):  # noqa: UP036 (this script may be started by an older Python: say so)
        raise SetupError(f"Python 3.11 or newer is needed (this is {sys.version.split()[0]}); run this script with it")
    if venv.exists() and not (venv / "pyvenv.cfg").exists():
        raise SetupError(f"{venv} exists but is not a virtual environment (no pyvenv.cfg): move it away or name another")
    if not venv.exists():
        venv_module.create(venv, with_pip=True)
    return venv_python(venv)


def install_commands(python: Path | str, extras: list[str]) -> list[list[str]]:
    """The pip and ipykernel commands of the install, in order (also what `--dry-run` prints)."""
    target = "-e ." if not extras else f"-e .[{','.join(extras)}]"
    return [
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c", "constraints.txt",
         *target.split(" ", 1)],
        [str(python), "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL, "--display-name",
         KERNEL_DISPLAY_NAME, "--env", "ORT_DISABLE_TELEMETRY", "1"],
    ]


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


def setup(python: Path | str, prefix: Path, extras: list[str], *, dry_run: bool = False) -> None:
    """Install the pins (and extras), register the kernel and copy the JupyterLab settings into `python`'s env."""
    for command in install_commands(python, extras):
        print("+", " ".join(command), flush=True)
        if not dry_run:
            result = subprocess.run(command, cwd=REPO_ROOT)
            if result.returncode != 0:
                raise SetupError(f"`{' '.join(command[1:4])}` failed (exit {result.returncode}); its output is above")
    target = settings_dir(prefix) / "overrides.json"
    print(f"+ copy {OVERRIDES.relative_to(REPO_ROOT)} -> {target}", flush=True)
    if not dry_run:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(OVERRIDES, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["setup", "lab", "test"])
    parser.add_argument("--venv", type=Path, default=REPO_ROOT / ".venv", help="the virtual environment (.venv)")
    parser.add_argument("--here", action="store_true", help="install into the Python running this script, no venv")
    parser.add_argument("--extras", default="", help="comma-separated extras to add (test,book); `test` adds both")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)

    extras = [e for e in args.extras.split(",") if e]
    if args.command == "test":
        extras = sorted(set(extras) | {"test", "book"})
    python = Path(sys.executable) if args.here else (args.venv if args.dry_run else ensure_venv(args.venv))
    if not args.here and args.dry_run:
        python = venv_python(args.venv)
    stamp = None if args.here else stamp_of(args.venv, extras)
    if stamp is not None and up_to_date(stamp) and not args.dry_run:
        print(f"{args.venv} is up to date ({stamp.name} is newer than the pins): nothing to install")
    else:
        setup(python, Path(sys.prefix) if args.here else args.venv.resolve(), extras, dry_run=args.dry_run)
        if stamp is not None and not args.dry_run:
            stamp.touch()
    if args.dry_run or args.command == "setup":
        return 0
    if args.command == "lab":
        command = [str(python), "-m", "jupyter", "lab", "--ServerApp.root_dir=notebooks", "--allow-root"]
        return subprocess.call(command, cwd=REPO_ROOT, env={**os.environ, "ORT_DISABLE_TELEMETRY": "1"})
    return subprocess.call([str(python), "-m", "pytest", *PYTEST_ARGS], cwd=REPO_ROOT, env={**os.environ, **OFFLINE_ENV})


if __name__ == "__main__":
    sys.exit(main())
