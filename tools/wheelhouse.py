"""An install that needs no network at the venue: download every pinned wheel into a folder (a USB stick) beforehand,
then build the workbook's venv from that folder alone.

    make wheelhouse                                   # = python3 tools/wheelhouse.py download --dest wheelhouse
    make offline-install WHEELHOUSE=/media/usb/wheelhouse
    make lab                                          # the venv is in place: nothing is downloaded

    python3 tools/wheelhouse.py download --dest DIR [--extras book,test] [--platform P --python-version 3.12]
    python3 tools/wheelhouse.py install --from DIR [--venv .venv] [--extras ...] [--stamp .venv/.installed]
    .venv/bin/python tools/wheelhouse.py sizes [--venv .venv]   # what each dependency costs on disk

`download` needs the package registry (it is the step done at home); it fetches the pinned versions of
pyproject.toml's dependencies (and of the extras named) under constraints.txt, plus setuptools to build the workbook's
own package, as wheels only. By default the wheels suit the Python running this script on this machine; for an
instructor laptop of another kind, name its platform and Python (pip's --platform/--python-version; e.g.
macosx_11_0_arm64 and 3.12).

`install` creates the venv with the Python running this script (if absent), installs with `pip --no-index
--find-links DIR` (pip never contacts an index; like `make lab`, it writes no .pyc files for the learner's install and
compiles every module with the test extra), registers the workbook's Jupyter kernel and the JupyterLab settings
exactly as `make env` does, and touches the Makefile's stamp so `make lab` uses the venv as it is. It refuses, with
one message and exit status 2 and before writing anything, a folder with no wheels, a folder missing a wheel the
workbook names directly, and a --venv that exists but is not a virtual environment; a wheel pip still cannot find
(a dependency of a dependency) is named the same way.

`sizes` prints the venv's size, each installed distribution's size, and for each direct dependency of the workbook
what it costs alone: its own size plus the packages that nothing else in the venv needs.
Only the standard library is used, so any Python 3.11+ runs it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
KERNEL = "agent-memory"
KERNEL_DISPLAY_NAME = "Agent memory (workbook)"
EXIT_USAGE = 2


class UsageError(Exception):
    """A wheel folder or venv the install refuses; the message says what to do. Exit status 2, no traceback."""


def requirements(extras: list[str], root: Path = REPO_ROOT) -> list[str]:
    """pyproject.toml's dependencies, the named extras' ones, and what builds the workbook's package."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    requirements = list(project["project"]["dependencies"])
    optional = project["project"].get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"pyproject.toml has no extra {extra!r} (it has: {', '.join(optional) or 'none'})")
        requirements += optional[extra]
    return requirements + list(project["build-system"]["requires"])


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def megabytes(size: int) -> str:
    return f"{size / 1e6:.0f} MB"


def download(dest: Path, extras: list[str], platform: str | None, python_version: str | None) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(dest), "--only-binary", ":all:"]
    command += ["-c", str(REPO_ROOT / "constraints.txt")]
    if platform:
        command += ["--platform", platform]
    if python_version:
        command += ["--python-version", python_version]
    started = time.monotonic()
    subprocess.run(command + requirements(extras), check=True)
    wheels = sorted(dest.glob("*.whl"))
    target = f"{platform or 'this machine'}, Python {python_version or '.'.join(map(str, sys.version_info[:2]))}"
    (dest / "README.txt").write_text(
        f"Wheels of the agent-memory workbook for {target} (extras: {', '.join(extras) or 'none'}).\n"
        "Install with no network from the workbook's folder:  make offline-install WHEELHOUSE=<this folder>\n",
        encoding="utf-8",
    )
    print(f"{len(wheels)} wheels, {megabytes(folder_size(dest))}, in {dest} ({time.monotonic() - started:.0f} s)")


def _requirement_name(requirement: str) -> str:
    return _name(re.match(r"\s*([A-Za-z0-9._-]+)", requirement).group(1))


def _wheel_name(path: Path) -> str:
    return _name(path.name.split("-", 1)[0])


def missing_wheels(source: Path, extras: list[str], root: Path = REPO_ROOT) -> list[str]:
    """The workbook's direct requirements (and its build requirements) that have no wheel at all in the folder."""
    present = {_wheel_name(path) for path in source.glob("*.whl")}
    needed = [r for r in requirements(extras, root) if _applies(r)]
    return sorted({_requirement_name(r) for r in needed} - present)


def check_venv(venv: Path) -> None:
    """Refuse a --venv that exists but is not a virtual environment, before anything is written inside it."""
    if venv.exists() and not venv.is_dir():
        raise UsageError(f"--venv {venv} is a file, not a virtual environment: name a new folder or an existing venv")
    if venv.exists() and any(venv.iterdir()) and not (venv / "pyvenv.cfg").is_file():
        raise UsageError(f"--venv {venv} exists but is not a virtual environment (no pyvenv.cfg): nothing was written "
                         "in it; move it away or name another folder")


def _pip_missing(output: str) -> list[str]:
    """What pip reported it found no distribution for (in the order it said so)."""
    found = re.findall(r"(?:No matching distribution found for|satisfies the requirement) ([^\s(;]+)", output)
    return list(dict.fromkeys(found))


def install(source: Path, venv: Path, extras: list[str], stamp: Path | None, root: Path = REPO_ROOT,
            compile_: bool | None = None) -> None:
    """Build (or complete) the venv from the folder only, then register the kernel as the Makefile does. Byte-compiled
    as tools/workbook.py's install is (compile_=None): not the learner's install, every module with the test extra."""
    if compile_ is None:
        compile_ = "test" in extras
    if not source.is_dir():
        raise UsageError(f"the wheel folder {source} does not exist: run `make wheelhouse` (with the network) first")
    if not any(source.glob("*.whl")):
        raise UsageError(f"{source} holds no wheels: run `make wheelhouse` (with the network) first")
    missing = missing_wheels(source, extras, root)
    if missing:
        raise UsageError(f"the wheel folder {source} is incomplete: no wheel for {', '.join(missing)}. Download it again "
                         f"with the network (`make wheelhouse`{' with --extras ' + ','.join(extras) if extras else ''}); "
                         "nothing was installed")
    check_venv(venv)
    started = time.monotonic()
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    target = "." + (f"[{','.join(extras)}]" if extras else "")
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links", str(source),
         "-c", "constraints.txt", *([] if compile_ else ["--no-compile"]), "-e", target],
        cwd=root, capture_output=True, text=True,
    )
    sys.stdout.write(pip.stdout)
    if pip.returncode != 0:
        missing = _pip_missing(pip.stdout + pip.stderr)
        if missing:
            raise UsageError(f"the wheel folder {source} is incomplete: pip found no wheel there for {', '.join(missing)} "
                             "(needed by the workbook's dependencies). Download the folder again with the network "
                             "(`make wheelhouse`) on a machine like this one")
        last = "\n".join(pip.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"wheelhouse: pip could not install from {source} (exit status {pip.returncode}):\n{last}")
    sys.stderr.write(pip.stderr)
    subprocess.run(
        [str(python), "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL, "--display-name", KERNEL_DISPLAY_NAME,
         "--env", "ORT_DISABLE_TELEMETRY", "1"],
        check=True, cwd=root,
    )
    settings = venv / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "tools" / "jupyterlab-overrides.json", settings / "overrides.json")
    if stamp is not None:
        stamp.touch()
    print(f"venv {venv} built from {source} with no index in {time.monotonic() - started:.0f} s; its size: {megabytes(folder_size(venv))}")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _applies(requirement: str) -> bool:
    """Whether a Requires-Dist line applies here without extras (its environment marker evaluated when `packaging`
    is importable, as in the workbook's venv; otherwise only extras' lines are left out)."""
    if ";" not in requirement:
        return True
    if "extra ==" in requirement:
        return False
    try:
        from packaging.markers import Marker
    except ImportError:
        return True
    return Marker(requirement.split(";", 1)[1]).evaluate()


def sizes(venv: Path, groups: list[list[str]]) -> None:
    """Print what each distribution costs in the venv (run with the venv's own Python, or any: it reads files only)."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    installed: dict[str, tuple[int, list[str]]] = {}
    for info in site.glob("*.dist-info"):
        metadata = (info / "METADATA").read_text(encoding="utf-8", errors="replace")
        name = _name(re.search(r"^Name: (.+)$", metadata, re.M).group(1).strip())
        size = 0
        for line in (info / "RECORD").read_text(encoding="utf-8").splitlines() if (info / "RECORD").exists() else []:
            path = (site / line.rsplit(",", 2)[0]).resolve()
            if path.is_file():
                size += path.stat().st_size
        requires = []
        for requirement in re.findall(r"^Requires-Dist: (.+)$", metadata, re.M):
            if not _applies(requirement):
                continue
            requires.append(_name(re.match(r"[A-Za-z0-9._-]+", requirement).group(0)))
        installed[name] = (size, requires)

    def closure(names: list[str]) -> set[str]:
        seen: set[str] = set()
        todo = [n for n in names if n in installed]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += [r for r in installed[name][1] if r in installed]
        return seen

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    direct = [_name(re.match(r"[A-Za-z0-9._-]+", r).group(0)) for r in project["project"]["dependencies"]]
    total = folder_size(venv)
    print(f"venv {venv}: {megabytes(total)} in all; site-packages {megabytes(folder_size(site))} in {len(installed)} distributions")
    print("\nwhat each direct dependency costs alone (itself + what nothing else needs), largest first:")
    rows = []
    for dep in direct:
        others = closure([d for d in direct if d != dep])
        alone = closure([dep]) - others
        rows.append((sum(installed[n][0] for n in alone), dep, sorted(alone - {dep})))
    for size, dep, exclusive in sorted(rows, reverse=True):
        extra = f"  (+ {', '.join(exclusive)})" if exclusive else ""
        print(f"  {megabytes(size):>7}  {dep}{extra}")
    for group in groups:
        names = [_name(n) for n in group]
        alone = closure(names) - closure([d for d in direct if d not in names])
        print(f"\n{' + '.join(names)} together cost {megabytes(sum(installed[n][0] for n in alone))}: {', '.join(sorted(alone))}")
    print("\nlargest distributions (own files):")
    for name, (size, _) in sorted(installed.items(), key=lambda item: -item[1][0])[:20]:
        print(f"  {megabytes(size):>7}  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    down = commands.add_parser("download", help="fetch every pinned wheel into a folder (needs the registry)")
    down.add_argument("--dest", type=Path, default=REPO_ROOT / "wheelhouse")
    down.add_argument("--platform", help="pip --platform of the laptop, e.g. macosx_11_0_arm64 (default: this machine)")
    down.add_argument("--python-version", help="e.g. 3.12 (default: the Python running this script)")
    inst = commands.add_parser("install", help="build the venv from the folder with no network")
    inst.add_argument("--from", dest="source", type=Path, default=REPO_ROOT / "wheelhouse")
    inst.add_argument("--venv", type=Path, default=REPO_ROOT / ".venv")
    inst.add_argument("--stamp", type=Path, help="file to touch when done (the Makefile's .venv/.installed)")
    compiling = inst.add_mutually_exclusive_group()
    compiling.add_argument("--no-compile", dest="compile_", action="store_false", default=None,
                           help="write no .pyc files (the default for the learner's install, as make lab)")
    compiling.add_argument("--compile", dest="compile_", action="store_true",
                           help="write a .pyc file for every module (the default with the test extra)")
    for sub in (down, inst):
        sub.add_argument("--extras", default="", help="comma-separated extras of pyproject.toml to include, e.g. book,test")
    size = commands.add_parser("sizes", help="what each dependency costs in a venv")
    size.add_argument("--venv", type=Path, default=REPO_ROOT / ".venv")
    size.add_argument("--group", action="append", default=[], help="comma-separated direct dependencies to price together")
    args = parser.parse_args(argv)
    if args.command == "sizes":
        sizes(args.venv, [g.split(",") for g in args.group])
        return 0
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    if args.command == "download":
        download(args.dest.resolve(), extras, args.platform, args.python_version)
        return 0
    try:
        install(args.source.resolve(), args.venv.resolve(), extras, args.stamp, compile_=args.compile_)
    except UsageError as error:
        print(f"wheelhouse: {error}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    raise SystemExit(main())
