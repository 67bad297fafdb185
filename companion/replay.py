"""Replay the series for a class: every notebook (or some) executed into an output folder, parameters from one YAML file.

    python -m companion.replay                          # the whole series, classes/sample.yaml, into replays/sample/
    python -m companion.replay 03 05 --class my.yaml    # a subset, by number or name
    python -m companion.replay --dry-run --learners 30  # what the same replay would cost on Bedrock; nothing is sent
    python -m companion.replay --backend bedrock        # prints that estimate first and asks before sending
    python -m companion.replay --backend bedrock --bedrock-endpoint local --voice paraphrase
                                                        # the Bedrock path on the wire, locally, in the second voice

The committed notebooks are only read. Each run writes, in the output folder: the executed notebooks, `workspace/`
(every notebook's workspace, through $WORKBOOK_WORKSPACE_ROOT, so the repository's workspace/ is not touched either),
`usage.jsonl` (one line per model call, written by `companion.models.usage_log` through $WORKBOOK_USAGE_LOG), and the summary
as `summary.html` and `summary.json`. Notebooks run in parallel, up to the number of cores, each in its own worker
process with its own kernel. The exit status is 0 when every cell ran and every check cell held, 1 when one did not
(the summary names the notebook and the cell), 2 for a bad class file, counts file, output folder or command line
(a message, never a traceback), 130 when interrupted (Ctrl-C) and 143 when terminated (SIGTERM): either way the running
notebooks' workers and kernels are stopped first.

The class file (see classes/sample.yaml):

    class: sample             # names the default output folder replays/<class>/
    backend: offline          # or bedrock; --backend overrides it
    learners: 30              # class size, for the Bedrock cost estimate
    common:                   # given to every notebook whose parameters cell has that name
      user_name: Ada
    notebooks:                # per notebook, by number ("03") or name; each name must be one of its parameters
      "03": {window_size: 8}

A notebook the class file does not name runs with its defaults (and the `common` values it accepts); a name in the
class file that matches no notebook in the folder is reported and skipped, so one class file serves a series that grows.
A class file may not use YAML anchors or aliases (`&name`, `*name`: a few hundred bytes of them expand to gigabytes of
parameters) nor a text that UTF-8 cannot write (a lone surrogate such as "\udc80"); either is refused with exit 2.

One replay at a time writes an output folder: a replay holds an exclusive lock (`.workbook-replay.lock` inside it,
fcntl) from before it empties the folder until its summary is written; a second replay into the same folder stops at
once, naming the first one's process id.
"""

from __future__ import annotations

import argparse
import html
import json
import multiprocessing
import os
import queue as queue_module
import re
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:  # POSIX (Linux, macOS), as the workbook's other locks (companion/sessions/two_writers.py)
    import fcntl
except ImportError:  # pragma: no cover - Windows: no output lock
    fcntl = None  # type: ignore[assignment]

from companion.support.ledger import CLAIM_LINE
from companion.support.paths import NOTEBOOKS_DIR, REPO_ROOT

DEFAULT_CLASS_FILE = REPO_ROOT / "classes" / "sample.yaml"
DEFAULT_OUTPUT_ROOT = REPO_ROOT / "replays"
MARKER = ".workbook-replay"
LOCK = ".workbook-replay.lock"
SHOWN_CHARS = 200
"""How much of a value from a class file a message quotes."""
ENGINE = "workbook-replay"
KERNEL = "python3"  # the kernel of the interpreter running the replay (the workbook's .venv under `make replay`)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


class ReplayError(ValueError):
    """A class file, selection or output folder the replay refuses; nothing was executed."""


class Terminated(KeyboardInterrupt):
    """SIGTERM to the replay: handled as Ctrl-C (workers and kernels stopped), exit status 143."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """repr() of a value, cut to `limit` characters with a count of the rest (a message never quotes 1 MB)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def read_text_file(path: Path, what: str) -> str:
    """A text file the replay reads (class file, counts file), or a ReplayError naming it: missing, unreadable or
    not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReplayError(f"{what} {path} not found.") from None
    except UnicodeDecodeError as error:
        raise ReplayError(f"{what} {path} is not UTF-8 text (byte {error.start}: {error.reason}); save it as UTF-8.") from None
    except OSError as error:
        raise ReplayError(f"{what} {path} cannot be read: {error.strerror or error}.") from None


# --- the plan: which notebooks, with which parameters ---------------------------------------------------------------


@dataclass
class ClassFile:
    name: str
    backend: str | None
    learners: int
    common: dict[str, Any]
    notebooks: dict[str, dict[str, Any]]
    path: Path | None = None


@dataclass
class Plan:
    name: str  # the notebook's file stem, e.g. "03_sliding_window"
    source: Path
    parameters: dict[str, Any]  # what papermill injects
    given: dict[str, Any]  # what the class file set (shown in the summary)
    accepted: dict[str, Any] = field(default_factory=dict)  # the parameters cell: name -> default


def discover(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The series' notebooks in order: every NN_name.ipynb in the folder, whatever is there today."""
    return sorted(p for p in Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb") if p.is_file())


def match(selector: str, notebooks: list[Path]) -> Path | None:
    """The notebook a selector names: its number ("3", "03"), its stem, its file name, or a path to it."""
    text = str(selector).strip()
    if text.endswith(".ipynb") and Path(text).is_file() and "/" in text:
        return Path(text).resolve()
    for path in notebooks:
        if text in (path.stem, path.name) or (text.isdigit() and int(text) == int(path.name[:2])):
            return path
    return None


def load_class_file(path: Path | None) -> ClassFile:
    """Read and check a class file; None gives the notebooks' own defaults (no parameters, class "defaults")."""
    if path is None:
        return ClassFile("defaults", None, 1, {}, {})
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ReplayError(f"Class file {path} not found.")
    text = read_text_file(path, "Class file")
    try:
        _refuse_aliases(path, text)
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ReplayError(f"Class file {path} is not valid YAML: {str(error)[:500]}") from None
    _refuse_surrogates(path, data)
    if not isinstance(data, dict):
        raise ReplayError(f"Class file {path} must be a mapping (class, backend, learners, common, notebooks).")
    unknown = set(data) - {"class", "backend", "learners", "common", "notebooks"}
    if unknown:
        raise ReplayError(f"Class file {path}: unknown key(s) {sorted(unknown)}; accepted: class, backend, learners, common, notebooks.")
    name = str(data.get("class") or path.stem)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", name) or ".." in name:
        raise ReplayError(f"Class file {path}: class must be a plain name (letters, digits, '-', '_', '.'); got {shown(name)}.")
    backend = data.get("backend")
    if backend is not None and backend not in ("offline", "bedrock"):
        raise ReplayError(f"Class file {path}: backend must be offline or bedrock; got {shown(backend)}.")
    learners = data.get("learners", 1)
    if isinstance(learners, bool) or not isinstance(learners, int) or learners < 1:
        raise ReplayError(f"Class file {path}: learners must be a whole number of 1 or more; got {shown(learners)}.")
    common = data.get("common") or {}
    notebooks = data.get("notebooks") or {}
    if not isinstance(common, dict) or not isinstance(notebooks, dict):
        raise ReplayError(f"Class file {path}: common and notebooks must be mappings.")
    for key, values in notebooks.items():
        if not isinstance(values, dict):
            raise ReplayError(f"Class file {path}: notebooks.{key} must be a mapping of parameter: value.")
    return ClassFile(name, backend, learners, dict(common), {str(k): dict(v) for k, v in notebooks.items()}, path)


def _refuse_aliases(path: Path, text: str) -> None:
    """Refuse any YAML anchor or alias, read from the parser's events (which never expand an alias), so the check
    costs the file's size whatever the aliases would expand to."""
    import yaml

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            mark = event.start_mark
            what = f"alias *{event.anchor}" if isinstance(event, yaml.AliasEvent) else f"anchor &{event.anchor}"
            raise ReplayError(f"Class file {path} uses the YAML {what[:80]} at line {mark.line + 1}: anchors and aliases are not "
                              "accepted in a class file (a few hundred bytes of them expand to gigabytes); write each "
                              "value out.")


def _refuse_surrogates(path: Path, data: Any, where: str = "") -> None:
    """Refuse a text (key or value, at any depth) that UTF-8 cannot write: a lone surrogate from a YAML escape such
    as "\\udc80" would make papermill write a 0-byte notebook."""
    if isinstance(data, dict):
        items = list(data.items())
        for key, value in items:
            name = f"{where}.{key}" if where else str(key)
            _refuse_surrogates(path, key, name)
            _refuse_surrogates(path, value, name)
    elif isinstance(data, list):
        for number, value in enumerate(data):
            _refuse_surrogates(path, value, f"{where}[{number}]")
    elif isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ReplayError(
                f"Class file {path}: {where[:100] or 'a value'} holds a lone surrogate (U+{ord(data[error.start]):04X} "
                f"at character {error.start + 1}), half of a pair that no UTF-8 file can hold: write the character "
                "itself.") from None


def parameters_of(path: Path) -> dict[str, Any]:
    """A notebook's parameters cell (the cell tagged `parameters`) as name -> default value, read with Python's own
    parser: every top-level `name = value` or `name: type = value` (a default that is not a literal reads as None)."""
    import ast

    import nbformat

    notebook = nbformat.read(path, as_version=4)
    cell = next((c for c in notebook.cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return {}
    values: dict[str, Any] = {}
    for node in ast.parse(cell.source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and node.value is not None:
            try:
                values[target.id] = ast.literal_eval(node.value)
            except ValueError:
                values[target.id] = None
    return values


def plan_replay(
    selectors: list[str], class_file: ClassFile, backend: str, notebooks_dir: Path = NOTEBOOKS_DIR
) -> tuple[list[Plan], list[str]]:
    """The notebooks to run with their parameters, and notes about class-file entries that match no notebook."""
    found = discover(notebooks_dir)
    if selectors:
        chosen = []
        for selector in selectors:
            path = match(selector, found)
            if path is None:
                names = ", ".join(p.stem for p in found) or "(none)"
                raise ReplayError(f"No notebook matches {selector!r} in {notebooks_dir}. There are: {names}.")
            if path not in chosen:
                chosen.append(path)
    else:
        chosen = found
    if not chosen:
        raise ReplayError(f"No notebooks (NN_name.ipynb) in {notebooks_dir}.")
    notes, per_notebook = [], {}
    for key, values in class_file.notebooks.items():
        path = match(key, found) or match(key, chosen)
        if path is None:
            notes.append(f"the class file names notebook {key!r}, which is not in {notebooks_dir}: skipped")
        else:
            per_notebook[path] = values
    plans = []
    for path in chosen:
        accepted = parameters_of(path)
        given = {k: v for k, v in class_file.common.items() if k in accepted}
        for key, value in per_notebook.get(path, {}).items():
            if key not in accepted:
                raise ReplayError(
                    f"Class file {class_file.path}: {path.stem} has no parameter {key!r}; its parameters are: {', '.join(accepted)}."
                )
            given[key] = value
        given.pop("backend", None)
        parameters = {**given, "backend": backend}
        if "interactive" in accepted:
            parameters["interactive"] = False  # widgets need a person at a browser; a replay is headless
        plans.append(Plan(path.stem, path, parameters, given, accepted))
    return plans, notes


# --- the output folder ----------------------------------------------------------------------------------------------


def protected_folders(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Folders a replay never writes into, deletes or wraps: the notebooks (committed ones and the folder replayed)
    and the learners' workspaces (the repository's workspace/ and $WORKBOOK_WORKSPACE_ROOT when set)."""
    from companion.support.workspace import REPOSITORY_WORKSPACE, WORKSPACE_ROOT_ENV

    folders = [Path(notebooks_dir), NOTEBOOKS_DIR, REPOSITORY_WORKSPACE]
    if os.environ.get(WORKSPACE_ROOT_ENV):
        folders.append(Path(os.environ[WORKSPACE_ROOT_ENV]))
    return list(dict.fromkeys(Path(os.path.realpath(folder)) for folder in folders))


def check_output(out: Path, notebooks_dir: Path = NOTEBOOKS_DIR) -> tuple[Path, str]:
    """The output folder's real path and how to name it, or a ReplayError; nothing is created or deleted.

    The guard compares real paths: a symlink anywhere in `out` is followed first, so no link leads a replay into
    the notebooks or a workspace. A link as the output folder itself is refused."""
    given = Path(os.path.abspath(out))
    if given.is_symlink() or (given.exists() and not given.is_dir()):
        raise ReplayError(f"The output folder {given} is not a plain folder.")
    out = Path(os.path.realpath(given))  # every symlink in the path followed, before the guard
    shown = given if out == given else f"{given} (really {out})"
    for protected in protected_folders(notebooks_dir):
        if out == protected or protected in out.parents or out in protected.parents:
            raise ReplayError(f"The output folder {shown} would be {protected} or around it: choose a folder of its own.")
    if out.exists() and not os.access(out, os.R_OK | os.W_OK | os.X_OK):
        raise ReplayError(f"The output folder {shown} cannot be written to.")
    if out.exists() and any(p.name != LOCK for p in out.iterdir()) and not (out / MARKER).is_file():
        raise ReplayError(
            f"The output folder {shown} holds files that are not an earlier replay (no {MARKER} inside): "
            "choose a new or empty folder. Nothing was deleted."
        )
    return out, str(shown)


def prepare_output(out: Path, notebooks_dir: Path = NOTEBOOKS_DIR) -> Path:
    """Create (or empty, when it holds an earlier replay) the output folder; refuse any other folder (check_output)."""
    out, shown = check_output(out, notebooks_dir)
    try:
        for old in out.iterdir() if out.exists() else []:  # an earlier replay (it has the marker): replaced
            if old.name == LOCK:
                continue  # the lock of this replay, held
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
        out.mkdir(parents=True, exist_ok=True)
        (out / MARKER).write_text("Output of `python -m companion.replay`; the next replay into this folder replaces it.\n")
        (out / ".gitignore").write_text("*\n")  # a replay inside the repository never shows up in `git status`
    except OSError as error:
        raise ReplayError(f"The output folder {shown} cannot be created or emptied: {error.strerror or error} "
                          f"({error.filename or out}).") from None
    return out


_HELD: dict[Path, int] = {}  # output folder (real path) -> the lock file's descriptor, held by this process


@contextmanager
def output_lock(out: Path) -> Iterator[Path]:
    """Hold the output folder's exclusive lock for the block (created with the folder if missing), or refuse at once
    with a ReplayError naming the process that holds it. Re-entrant within this process; released when the process
    ends, however it ends (the kernel drops an flock with its last descriptor)."""
    real = Path(os.path.realpath(os.path.abspath(out)))
    if real in _HELD or fcntl is None:
        yield real
        return
    try:
        real.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(real / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as error:
        raise ReplayError(f"The output folder {out} cannot be created or locked: {error.strerror or error} "
                          f"({error.filename or real}).") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(descriptor, 64, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(descriptor)
        raise ReplayError(f"The output folder {out} is in use by another replay (process {holder}): wait for it to "
                          "end, or choose another --out. Nothing was changed.") from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    _HELD[real] = descriptor
    try:
        yield real
    finally:
        del _HELD[real]
        os.close(descriptor)  # releases the lock; the file stays (an empty folder is ours by it)


# --- one notebook, in a worker process ------------------------------------------------------------------------------


def _register_engine(events: Any, name: str) -> None:
    """A papermill engine whose cell hooks also report progress to the parent process."""
    from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines

    class Reporting(NotebookExecutionManager):
        def cell_start(self, cell, cell_index=None, **kwargs):
            super().cell_start(cell, cell_index, **kwargs)
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            events.put(("cell", name, cell_index, first[:50]))

        def cell_complete(self, cell, cell_index=None, **kwargs):
            super().cell_complete(cell, cell_index, **kwargs)
            events.put(("cell_done", name, cell_index))

    class Engine(NBClientEngine):
        @classmethod
        def execute_notebook(cls, nb, kernel_name, output_path=None, progress_bar=False, log_output=False,
                             autosave_cell_every=30, **kwargs):
            manager = Reporting(nb, output_path=output_path, progress_bar=False, log_output=log_output,
                                autosave_cell_every=autosave_cell_every)
            events.put(("start", name, len(nb.cells)))
            manager.notebook_start()
            try:
                cls.execute_managed_notebook(manager, kernel_name, log_output=log_output, **kwargs)
            finally:
                manager.notebook_complete()
            return manager.nb

    papermill_engines.register(ENGINE, Engine)


def _worker(job: dict[str, Any], events: Any) -> None:
    """Run one notebook with papermill; report progress and the outcome through `events`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers and their kernels
    os.environ.update(job["env"])
    log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)  # the kernel's and papermill's messages go to logs/<notebook>.log, not between the progress bars
    import papermill
    from papermill.exceptions import PapermillExecutionError

    _register_engine(events, job["name"])
    started = time.monotonic()
    error = None
    try:
        papermill.execute_notebook(
            job["source"], job["output"], parameters=job["parameters"], engine_name=ENGINE, kernel_name=KERNEL,
            cwd=str(Path(job["source"]).parent), progress_bar=False, execution_timeout=job["timeout"],
        )
    except PapermillExecutionError as failure:
        error = {"ename": failure.ename, "evalue": failure.evalue}
    except Exception as failure:  # a kernel that would not start, a timeout: the notebook failed, the replay goes on
        error = {"ename": type(failure).__name__, "evalue": str(failure)}
    events.put(("result", job["name"], {"seconds": time.monotonic() - started, "error": error}))


# --- reading an executed notebook -----------------------------------------------------------------------------------


def is_check_cell(source: str) -> bool:
    """A "Check yourself" cell: code that asserts, or that shows a claims ledger (`.report()`)."""
    return bool(re.search(r"^\s*assert\b", source, re.MULTILINE)) or bool(re.search(r"\.report\(\)", source))


CHECK = re.compile(r"^([✓✗–]) \[([^\]]+)\] (.*)$")


def read_claims(notebook: Any) -> dict[str, Any]:
    """The claims ledgers an executed notebook showed (companion/support/ledger.py, text form): claims held, failed
    and not checked, and each failed claim with its id, its words and the checks that failed under it."""
    claims: dict[str, Any] = {"held": 0, "failed": 0, "not_checked": 0, "failures": []}
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            plain = output.get("data", {}).get("text/plain", "")
            if not re.match(r"^[^\n]*: \d+ of \d+ claims hold", plain):
                continue
            lines = plain.splitlines()
            failed_checks = [m.groups() for m in map(CHECK.match, lines) if m and m.group(1) == "✗"]
            for match in filter(None, map(CLAIM_LINE.match, lines)):
                mark, ref, label = match.group(1), match.group(2), match.group(3)
                key = {"✓": "held", "✗": "failed", "–": "not_checked"}[mark]
                claims[key] += 1
                if mark == "✗":
                    under = [words for _, refs, words in failed_checks if ref in refs.split()]
                    claims["failures"].append({"claim": ref, "words": label, "checks": under})
    return claims


def read_outcome(path: Path) -> dict[str, Any]:
    """Check cells passed / failed / not run, the claims their ledgers decided, and the failing cell (numbered as in
    the committed notebook, from 1)."""
    import nbformat

    outcome: dict[str, Any] = {"passed": 0, "failed": 0, "not_run": 0, "failure": None, "cells": [],
                               "claims": {"held": 0, "failed": 0, "not_checked": 0, "failures": []}}
    if not path.exists():
        return outcome
    notebook = nbformat.read(path, as_version=4)
    outcome["claims"] = read_claims(notebook)
    number = 0
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags or "papermill-error-cell-tag" in tags:
            continue  # cells papermill added: not part of the committed notebook's numbering
        number += 1
        if cell.cell_type != "code":
            continue
        status = cell.metadata.get("papermill", {}).get("status")
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        duration = cell.metadata.get("papermill", {}).get("duration")
        outcome["cells"].append({"number": number, "id": cell.get("id"), "seconds": duration})
        failed = bool(errors) or status in ("failed", "running")  # "running" at the end: timed out or stopped
        if failed and outcome["failure"] is None:
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            outcome["failure"] = {
                "cell": number, "id": cell.get("id"), "check": is_check_cell(cell.source), "first_line": first[:80],
                "error": f"{errors[0]['ename']}: {errors[0]['evalue']}" if errors else "failed",
            }
        if is_check_cell(cell.source):
            if failed:
                outcome["failed"] += 1
            elif status == "completed":
                outcome["passed"] += 1
            else:
                outcome["not_run"] += 1
    return outcome


# --- running the plan -----------------------------------------------------------------------------------------------


def worker_context() -> Any:
    """Where the platform has it (Linux), workers forked from one server process that has imported the replay's modules
    once (multiprocessing's forkserver), rather than fresh interpreters that each import the companion, strands and
    papermill again (spawn: about 1.1 CPU-s a notebook, before its kernel starts). Elsewhere, spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["companion.replay", "papermill", "papermill.engines"])
    return context


def stop_worker_server(context: Any) -> None:
    """Stop the forkserver once its workers have ended and wait for it, so it does not outlive the replay and its
    processor time (its workers' and their kernels') counts in the replay's own, as a spawned worker's did."""
    if context.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    if server is not None and hasattr(server, "_stop"):  # CPython's ForkServer (3.8 and later)
        server._stop()


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def execute(plans: list[Plan], out: Path, *, jobs: int, timeout: int, progress: bool | None = None,
            echo: Any = print, extra_env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Run the plans, at most `jobs` at a time, each in a worker process; returns each notebook's result.

    On Ctrl-C (KeyboardInterrupt) the workers are terminated (their kernels exit when their parent does: ipykernel's
    parent poller) and the KeyboardInterrupt is raised again; partial outputs stay in `out`.
    """
    from tqdm import tqdm

    context = worker_context()
    events = context.Queue()
    usage_log = out / "usage.jsonl"
    base_env = {
        "WORKBOOK_WORKSPACE_ROOT": str(out / "workspace"),
        "WORKBOOK_USAGE_LOG": str(usage_log),
        "ORT_DISABLE_TELEMETRY": "1",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    if all(p.parameters["backend"] == "offline" for p in plans) or (extra_env or {}).get("WORKBOOK_BEDROCK_ENDPOINT"):
        base_env["AWS_EC2_METADATA_DISABLED"] = "true"
    base_env.update(extra_env or {})
    (out / "logs").mkdir(exist_ok=True)
    waiting = list(plans)
    running: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    dead_since: dict[str, float] = {}
    bars = {
        plan.name: tqdm(total=1, desc=plan.name, position=i, unit="cell", leave=True, disable=None if progress is None else not progress,
                        bar_format="{desc:<28} {bar:20} {n_fmt:>3}/{total_fmt:<3}{postfix}")
        for i, plan in enumerate(plans)
    }
    for bar in bars.values():
        bar.set_postfix_str("waiting", refresh=False)

    def say(line: str) -> None:
        (tqdm.write if progress is not False else echo)(line)
        sys.stdout.flush()  # a log file or a pipe sees each line as it happens

    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                plan = waiting.pop(0)
                job = {
                    "name": plan.name, "source": str(plan.source), "output": str(out / plan.source.name),
                    "parameters": plan.parameters, "timeout": timeout, "log": str(out / "logs" / f"{plan.name}.log"),
                    "env": {**base_env, "WORKBOOK_USAGE_LABEL": plan.name, "WORKBOOK_BACKEND": plan.parameters["backend"]},
                }
                process = context.Process(target=_worker, args=(job, events), name=f"replay-{plan.name}", daemon=True)
                process.start()
                running[plan.name] = process
            try:
                event = events.get(timeout=0.2)
            except queue_module.Empty:
                for name, process in list(running.items()):  # a worker that died without reporting (its last words
                    if process.is_alive() or name in results:  # may still be in the queue: wait 2 s for them first)
                        continue
                    dead_since.setdefault(name, time.monotonic())
                    if time.monotonic() - dead_since[name] > 2:
                        results[name] = {"seconds": 0.0, "error": {"ename": "WorkerDied", "evalue": f"exit code {process.exitcode}"}}
                        running.pop(name).join()
                continue
            kind, name = event[0], event[1]
            bar = bars[name]
            if kind == "start":
                bar.reset(total=event[2])
                bar.set_postfix_str("kernel starting")
                say(f"started {name} ({event[2]} cells)")
            elif kind == "cell":
                bar.set_postfix_str(f"cell {event[2] + 1}: {event[3]}")
            elif kind == "cell_done":
                bar.update(1)
            elif kind == "result":
                results[name] = event[2]
                bar.n = bar.total
                bar.set_postfix_str("failed" if event[2]["error"] else "done")
                say(f"finished {name} in {event[2]['seconds']:.1f} s" + (" (FAILED)" if event[2]["error"] else ""))
                process = running.pop(name)
                process.join()
    except KeyboardInterrupt:
        for process in running.values():
            process.terminate()
        for process in running.values():
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
        raise
    finally:
        for bar in bars.values():
            bar.close()
        stop_worker_server(context)
    return results


# --- the summary ----------------------------------------------------------------------------------------------------


def summarize(plans: list[Plan], results: dict[str, dict[str, Any]], out: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per notebook (and a total), and one line per failure naming the notebook and the cell."""
    from companion.models.usage_log import read_usage, totals

    usage = read_usage(out / "usage.jsonl")
    rows, failures = [], []
    for plan in plans:
        result = results.get(plan.name, {"seconds": 0.0, "error": {"ename": "NotRun", "evalue": "interrupted"}})
        outcome = read_outcome(out / plan.source.name)
        counted = totals([r for r in usage if r["notebook"] == plan.name])
        failure = outcome["failure"]
        if result["error"] and failure is None:
            error = result["error"]
            failure = {"cell": None, "id": None, "check": False, "first_line": "", "error": f"{error['ename']}: {error['evalue']}"}
        claims = outcome["claims"]
        for failed in claims["failures"]:
            checks = "; ".join(failed["checks"]) or "no check"
            failures.append(f"{plan.name}: claim {failed['claim']} fails: {failed['words']} (failing: {checks})")
        if failure and not (failure["check"] and claims["failures"]):
            where = f"cell {failure['cell']} ({'check cell' if failure['check'] else 'not a check cell'}, id {failure['id']}, " \
                    f"first line {failure['first_line']!r})" if failure["cell"] else "before any cell"
            failures.append(f"{plan.name}: {where}: {failure['error'].splitlines()[0] if failure['error'] else ''}")
        decided = claims["held"] + claims["failed"] + claims["not_checked"]
        rows.append({
            "notebook": plan.name,
            "parameters": ", ".join(f"{k}={v!r}" for k, v in plan.given.items()) or "(defaults)",
            "claims": f"{claims['held']}/{decided} hold" + (f", {claims['not_checked']} not checked"
                                                            if claims["not_checked"] else ""),
            "claims held": claims["held"],
            "claims failed": claims["failed"],
            "claims not checked": claims["not_checked"],
            "check cells passed": outcome["passed"],
            "check cells failed": outcome["failed"] + outcome["not_run"],
            "status": "passed" if not failure else ("check failed" if failure["check"] else "error"),
            "seconds": round(result["seconds"], 1),
            "model calls": counted["calls"],
            "tokens sent": counted["input"],
            "tokens received": counted["output"],
        })
    return rows, failures


def total_row(rows: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    return {
        "notebook": "total", "parameters": f"wall time {wall:.1f} s",
        "claims": f"{sum(r['claims held'] for r in rows)}/"
                  f"{sum(r['claims held'] + r['claims failed'] + r['claims not checked'] for r in rows)} hold",
        "claims held": sum(r["claims held"] for r in rows),
        "claims failed": sum(r["claims failed"] for r in rows),
        "claims not checked": sum(r["claims not checked"] for r in rows),
        "check cells passed": sum(r["check cells passed"] for r in rows),
        "check cells failed": sum(r["check cells failed"] for r in rows),
        "status": "passed" if all(r["status"] == "passed" for r in rows) else "FAILED",
        "seconds": round(sum(r["seconds"] for r in rows), 1),
        "model calls": sum(r["model calls"] for r in rows),
        "tokens sent": sum(r["tokens sent"] for r in rows),
        "tokens received": sum(r["tokens received"] for r in rows),
    }


def write_summary(out: Path, rows: list[dict[str, Any]], failures: list[str], header: dict[str, Any]) -> None:
    """summary.json (read back by --counts) and summary.html, beside the executed notebooks."""
    import pandas as pd

    (out / "summary.json").write_text(json.dumps({**header, "rows": rows, "failures": failures}, indent=2), encoding="utf-8")
    frame = pd.DataFrame(rows)
    frame["notebook"] = [
        f'<a href="{html.escape(r["notebook"])}.ipynb">{html.escape(r["notebook"])}</a>' if r["notebook"] != "total" else "total"
        for r in rows
    ]
    numbers = {c: "{:,}".format for c in ("model calls", "tokens sent", "tokens received")}
    listed = "".join(f"<li>{html.escape(line)}</li>" for line in failures) or "<li>none</li>"
    facts = "".join(f"<li>{html.escape(str(k))}: {html.escape(str(v))}</li>" for k, v in header.items())
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Replay summary</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:4px 8px;text-align:left}"
        "td:nth-child(n+3):not(:nth-child(5)){text-align:right}</style></head><body>"
        f"<h1>Replay of the series: {html.escape(str(header.get('class')))}</h1><ul>{facts}</ul>"
        f"{frame.to_html(index=False, escape=False, formatters=numbers)}<h2>Failures</h2><ul>{listed}</ul></body></html>"
    )
    (out / "summary.html").write_text(page, encoding="utf-8")


# --- the Bedrock estimate -------------------------------------------------------------------------------------------


def estimate(counts: dict[str, int], learners: int) -> dict[str, Any]:
    """Calls, tokens and dollars at the Nova Pro on-demand price in companion/measure/cost.py, for one replay and for a class."""
    from companion.measure.cost import NOVA_PRO_ON_DEMAND as price

    one = price.dollars(counts["input"], counts["output"])
    return {"calls": counts["calls"], "input": counts["input"], "output": counts["output"], "dollars": one,
            "learners": learners, "class dollars": one * learners, "price": price}


def estimate_text(e: dict[str, Any], notebooks: int) -> str:
    price = e["price"]
    return (
        f"On Bedrock this replay of {notebooks} notebook(s) sends {e['calls']:,} model calls with {e['input']:,} input tokens "
        f"and receives about {e['output']:,} output tokens.\n"
        "(Counted on the offline model over the same notebooks and parameters; Nova Pro words its replies differently, "
        "so the output tokens, and the input of later turns that carry them, are an estimate.)\n"
        f"At {price.model}, {price.region}: ${price.input_per_1k}/1k input, ${price.output_per_1k}/1k output tokens "
        f"(price as of {price.as_of}, companion/measure/cost.py): ${e['dollars']:.4f} for one replay; "
        f"a class of {e['learners']} learners each running it once: ${e['class dollars']:.2f}."
    )


def load_counts(path: Path, plans: list[Plan]) -> dict[str, int]:
    """The calls and tokens of the planned notebooks, from an earlier offline replay's summary.json."""
    text = read_text_file(Path(path), "Counts file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReplayError(f"Counts file {path} is not JSON ({error}): give the summary.json of an earlier replay.") from None
    shape = "give the summary.json an offline replay wrote (a mapping with backend and rows)"
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ReplayError(f"Counts file {path} is not a replay summary: {shape}.")
    offline_model = data.get("backend") == "offline" or data.get("bedrock endpoint") == "local"  # the offline model answered
    if not offline_model:
        raise ReplayError(f"{path} is a {data.get('backend')} replay; the estimate needs an offline one's counts.")
    fields = {"notebook": str, "status": str, "model calls": int, "tokens sent": int, "tokens received": int}
    for number, row in enumerate(data["rows"], 1):
        wrong = [name for name, kind in fields.items()
                 if not isinstance(row, dict) or not isinstance(row.get(name), kind) or isinstance(row.get(name), bool)]
        if wrong:
            raise ReplayError(f"Counts file {path}: row {number} has no valid {', '.join(repr(w) for w in wrong)}: {shape}.")
    by_name = {r["notebook"]: r for r in data["rows"]}
    missing = [p.name for p in plans if p.name not in by_name]
    if missing:
        raise ReplayError(f"{path} has no counts for {', '.join(missing)}: replay them offline first.")
    rows = [by_name[p.name] for p in plans]
    for row in rows:
        if row["status"] != "passed":
            print(f"note: {row['notebook']} did not pass in {path} ({row['status']}): its counts stop where it stopped")
    return {"calls": sum(r["model calls"] for r in rows), "input": sum(r["tokens sent"] for r in rows),
            "output": sum(r["tokens received"] for r in rows)}


# --- the command ----------------------------------------------------------------------------------------------------


def run_replay(plans: list[Plan], out: Path, args: argparse.Namespace, class_file: ClassFile, backend: str) -> tuple[int, list[dict]]:
    """Prepare the folder, execute, write and print the summary; returns the exit status and the rows."""
    with output_lock(check_output(out, args.notebooks_dir)[0]):
        return _run_replay(plans, out, args, class_file, backend)


def _run_replay(plans: list[Plan], out: Path, args: argparse.Namespace, class_file: ClassFile,
                backend: str) -> tuple[int, list[dict]]:
    from companion.support.display import text_table

    out = prepare_output(out, args.notebooks_dir)
    extra_env = {}
    if getattr(args, "voice", None):
        extra_env["WORKBOOK_VOICE"] = args.voice
    where = ""
    if backend == "bedrock" and getattr(args, "bedrock_endpoint", None) == "local":
        extra_env["WORKBOOK_BEDROCK_ENDPOINT"] = "local"
        where = " (the local Converse endpoint on 127.0.0.1: nothing is sent to AWS)"
    voice = f", voice {args.voice}" if getattr(args, "voice", None) else ""
    print(f"Replaying {len(plans)} notebook(s) on the {backend} backend{where}{voice}, {args.jobs} at a time, into {out}")
    started = time.monotonic()
    try:
        results = execute(plans, out, jobs=args.jobs, timeout=args.timeout, progress=args.progress, extra_env=extra_env)
    except KeyboardInterrupt as interrupt:
        how = "Terminated (SIGTERM)" if isinstance(interrupt, Terminated) else "Interrupted"
        print(f"\n{how}: the running notebooks were stopped; partial outputs are in {out}. "
              f"The notebooks in {args.notebooks_dir} were only read, never written.", file=sys.stderr)
        return (EXIT_TERMINATED if isinstance(interrupt, Terminated) else EXIT_INTERRUPTED), []
    wall = time.monotonic() - started
    rows, failures = summarize(plans, results, out)
    rows.append(total_row(rows, wall))
    header = {"class": class_file.name, "class file": str(class_file.path or "(none)"), "backend": backend,
              "bedrock endpoint": extra_env.get("WORKBOOK_BEDROCK_ENDPOINT", "aws") if backend == "bedrock" else None,
              "voice": extra_env.get("WORKBOOK_VOICE") or os.environ.get("WORKBOOK_VOICE") or "plain",
              "notebooks": len(plans), "jobs": args.jobs, "wall seconds": round(wall, 1)}
    write_summary(out, rows, failures, header)
    print()
    short = {"model calls": "calls", "tokens received": "tokens back"}  # summary.html and .json keep the full names
    shown = ("notebook", "parameters", "claims", "status", "seconds", "model calls", "tokens sent", "tokens received")
    print(text_table([{short.get(k, k): row[k] for k in shown} for row in rows], width=44))
    print(f"\nSummary: {out / 'summary.html'}")
    if failures:
        print("\nFailed:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
        return EXIT_FAILED, rows
    total = rows[-1]
    print(f"No claim failed: {total['claims']} in {len(rows) - 1} notebook(s).")
    return EXIT_OK, rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m companion.replay",
        description="Replay the workbook's notebooks for a class into an output folder, never touching the committed notebooks.",
    )
    parser.add_argument("notebooks", nargs="*", help="notebooks to run, by number (03) or name; default: all")
    parser.add_argument("--class", dest="class_file", type=Path, default=None,
                        help=f"the class file (YAML); default: {DEFAULT_CLASS_FILE.relative_to(REPO_ROOT)}")
    parser.add_argument("--defaults", action="store_true",
                        help="no class file (even if --class is given): every notebook with its own defaults, as each learner runs it")
    parser.add_argument("--out", type=Path, default=None, help="output folder; default: replays/<class>/")
    parser.add_argument("--backend", choices=("offline", "bedrock"), default=None,
                        help="model backend; default: the class file's, else $WORKBOOK_BACKEND, else offline")
    parser.add_argument("--bedrock-endpoint", choices=("aws", "local"), default="aws",
                        help="with --backend bedrock: aws (real Bedrock, paid: the estimate is shown and confirmed first) or "
                             "local (the real BedrockModel against a local Converse endpoint on 127.0.0.1, answered by "
                             "the offline model: no credentials, nothing paid, no question asked)")
    parser.add_argument("--voice", choices=("plain", "paraphrase"), default=None,
                        help="the offline model's voice (also behind the local endpoint); default: $WORKBOOK_VOICE, else plain")
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="notebooks run at once (default: the cores, %(default)s)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a cell may run (default %(default)s)")
    parser.add_argument("--learners", type=int, default=None, help="class size for the cost estimate (default: the class file's)")
    parser.add_argument("--dry-run", action="store_true",
                        help="count the calls offline and print what the replay would cost on Bedrock; send nothing")
    parser.add_argument("--counts", type=Path, default=None,
                        help="summary.json of an earlier offline replay to take the counts from (skips the offline count)")
    parser.add_argument("--yes", action="store_true", help="send to Bedrock without asking")
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None, help="no progress bars")
    parser.add_argument("--notebooks-dir", type=Path, default=NOTEBOOKS_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if args.timeout < 1:
        parser.error("--timeout must be 1 second or more (a cell that may run forever is not a replay)")
    if args.learners is not None and args.learners < 1:
        parser.error("--learners must be 1 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)  # SIGTERM stops the workers and kernels as Ctrl-C does
    try:
        return _main(args)
    except KeyboardInterrupt as interrupt:  # before or after the notebooks ran: nothing is running
        print("\nTerminated (SIGTERM)." if isinstance(interrupt, Terminated) else "\nInterrupted.", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(interrupt, Terminated) else EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(args: argparse.Namespace) -> int:
    try:
        if args.defaults and args.class_file:
            print(f"note: --defaults: {args.class_file} is not used; every notebook runs with its own defaults")
        class_file = load_class_file(None if args.defaults else args.class_file or DEFAULT_CLASS_FILE)
        from companion.models.backends import resolve_backend

        backend = resolve_backend(args.backend or class_file.backend)
        plans, notes = plan_replay(args.notebooks, class_file, backend, args.notebooks_dir)
        out = args.out or DEFAULT_OUTPUT_ROOT / class_file.name
        real_out = check_output(out, args.notebooks_dir)[0]  # refused here, before any count or replay runs
        paid = backend == "bedrock" and args.bedrock_endpoint != "local"
        if args.dry_run or paid:  # nothing written yet: a paid replay takes the lock once the person has said yes
            return _plan_and_run(args, class_file, backend, plans, notes, out)
        with output_lock(real_out):  # held from here: a second replay into this folder stops at once
            return _plan_and_run(args, class_file, backend, plans, notes, out)
    except ReplayError as error:
        print(f"replay: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as error:  # an unknown backend from $WORKBOOK_BACKEND
        print(f"replay: {error}", file=sys.stderr)
        return EXIT_USAGE


def _plan_and_run(args: argparse.Namespace, class_file: ClassFile, backend: str, plans: list[Plan], notes: list[str],
                  out: Path) -> int:
    """The estimate (when asked or when Bedrock is paid) and the replay, once the output folder is checked."""
    learners = args.learners or class_file.learners
    for note in notes:
        print(f"note: {note}")
    local = backend == "bedrock" and args.bedrock_endpoint == "local"
    if backend == "bedrock" and not args.dry_run and not local:
        _require_credentials()
    if (backend == "bedrock" and not local) or args.dry_run:
        if args.counts:
            counts = load_counts(args.counts, plans)
            print(f"Counts from {args.counts}.")
        else:
            print("Counting the calls on the offline model first (nothing is sent anywhere)...")
            offline = [Plan(p.name, p.source, {**p.parameters, "backend": "offline"}, p.given, p.accepted) for p in plans]
            counted_in = Path(out).with_name(Path(out).name + "-offline-count")
            status, rows = run_replay(offline, counted_in, args, class_file, "offline")
            if status in (EXIT_INTERRUPTED, EXIT_TERMINATED):
                return status
            if status != EXIT_OK:
                print("The offline count did not pass, so there is no estimate.", file=sys.stderr)
                return status
            total = rows[-1]
            counts = {"calls": total["model calls"], "input": total["tokens sent"], "output": total["tokens received"]}
        print()
        print(estimate_text(estimate(counts, learners), len(plans)))
        if args.dry_run:
            return EXIT_OK
        if not args.yes and not _confirm("Send these calls to Amazon Bedrock? [y/N] "):
            print("Nothing was sent.")
            return EXIT_FAILED
    status, _ = run_replay(plans, out, args, class_file, backend)
    return status


def _require_credentials() -> None:
    from companion.models import aws
    from companion.models.backends import DEFAULT_BEDROCK_MODEL_ID

    try:
        session = aws.session(None)
    except aws.AwsSetupError as error:
        raise ReplayError(str(error)) from None
    if not aws.has_credentials(session):
        model_id = os.environ.get("WORKBOOK_MODEL_ID") or DEFAULT_BEDROCK_MODEL_ID
        raise ReplayError(aws.credential_help("bedrock replay", model_id, aws.resolve_region(None, session),
                                              "replay with --backend offline, or see the estimate with --dry-run"))


def _confirm(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        print()
        return False


if __name__ == "__main__":
    sys.exit(main())
