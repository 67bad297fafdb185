"""Replaying a notebook's exercises: its hidden solution's code, a papermill run with other parameters and extra cells
appended, and the text the run printed; and the class replay of the whole series (`python -m companion.replay` with
classes/sample.yaml), which tests/conftest.py's `series_replay` fixture runs once a session and whose executed
notebooks the exercise tests read for the run with the sample class's parameters. Shared by tests/test_exercises_NN.py
and tests/test_replay.py."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import nbformat
import papermill
import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
SAMPLE = REPO / "classes" / "sample.yaml"
CHECK_YOURSELF = "## Check yourself"


def solution_code(notebook: nbformat.NotebookNode) -> list[str]:
    """The ```python blocks of the notebook's hidden solution, in order (what a learner would paste)."""
    (cell,) = [c for c in notebook.cells if c.cell_type == "markdown" and "<summary>Solution</summary>" in c.source]
    blocks = re.findall(r"```python\n(.*?)```", cell.source, re.DOTALL)
    return ["\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines()) for block in blocks]


def run(name: str, tmp_path: Path, parameters: dict, extra_cells: Sequence[str] = (), *,
        defaults: dict | None = None, before_checks: Sequence[str] = ()) -> nbformat.NotebookNode:
    """Execute notebooks/`name` on the offline model with `parameters` (over `defaults`), `extra_cells` appended and
    `before_checks` put just above "Check yourself" (where a learner who pastes a solution above the checks puts it)."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    if before_checks:
        at = next(i for i, c in enumerate(notebook.cells)
                  if c.cell_type == "markdown" and c.source.startswith(CHECK_YOURSELF))
        notebook.cells[at:at] = [nbformat.v4.new_code_cell(source) for source in before_checks]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in extra_cells]
    source, output = tmp_path / ("in_" + name), tmp_path / name
    nbformat.write(notebook, source)
    papermill.execute_notebook(
        str(source), str(output), parameters={"backend": "offline", **(defaults or {}), **parameters},
        kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False, execution_timeout=300,
    )
    return nbformat.read(output, as_version=4)


class _SetupKernel:
    """One kernel per test process for the notebooks' first cells. A refused parameter stops a notebook at its setup
    cell, so the refusal tests (about sixty) share this kernel and its imports instead of starting one each."""

    def __init__(self) -> None:
        from jupyter_client.manager import KernelManager

        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(cwd=str(NOTEBOOKS), env=dict(os.environ))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        atexit.register(self.close)

    def execute(self, code: str) -> dict:
        return self.client.execute_interactive(code, timeout=300, store_history=False,
                                               output_hook=lambda message: None)["content"]

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


_setup_kernel: _SetupKernel | None = None


def refuse(name: str, parameters: dict) -> None:
    """Run notebooks/`name` as `run` would (offline, `parameters` injected as papermill injects them) up to its setup
    cell, in this process's shared kernel with a fresh namespace and this process's environment; raise the
    PapermillExecutionError papermill would raise for the cell that refused, or fail if the setup cell ran through."""
    global _setup_kernel
    from papermill.translators import translate_parameters

    if _setup_kernel is None:
        _setup_kernel = _SetupKernel()
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    at = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    setup = next(i for i, c in enumerate(notebook.cells) if i > at + 1 and c.cell_type == "code")
    injected = translate_parameters("python", "python", {"backend": "offline", **parameters}, "injected")
    environment = json.dumps(dict(os.environ))
    fresh = ("get_ipython().run_line_magic('reset', '-f')\nimport os\n"
             f"os.environ.clear()\nos.environ.update({environment})\ndel os")
    for index, source in ((None, fresh), (at, notebook.cells[at].source), (None, injected),
                          (setup, notebook.cells[setup].source)):
        reply = _setup_kernel.execute(source)
        if reply["status"] == "error":
            if index is None:
                raise RuntimeError(f"the shared kernel failed: {reply['ename']}: {reply['evalue']}")
            raise papermill.PapermillExecutionError(index, reply.get("execution_count"), source, reply["ename"],
                                                    reply["evalue"], reply["traceback"])
    pytest.fail(f"{name} did not stop at its setup cell with {parameters}")


def printed(notebook: nbformat.NotebookNode, *, plain: bool = False) -> str:
    """What the run printed (stream outputs); with `plain`, also the text/plain of outputs that are not streams."""
    out = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = output.get("text", "")
            out.append(text or (output.get("data", {}).get("text/plain", "") if plain else ""))
    return "".join(out)


LEDGER_HEADLINE = re.compile(r"^(?P<title>[^\n]*): (?P<held>\d+) of (?P<rows>\d+) claims hold(?P<rest>[^\n]*)$", re.MULTILINE)


def ledger_text(notebook: nbformat.NotebookNode) -> str:
    """The text form of every claims ledger the run showed (companion.support.ledger), one after another."""
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            plain = output.get("data", {}).get("text/plain", "")
            if LEDGER_HEADLINE.match(plain):
                texts.append(plain)
    return "\n".join(texts)


def checks_held(notebook: nbformat.NotebookNode) -> bool:
    """True when the run showed at least one claims ledger and no row of any ledger fails."""
    headlines = list(LEDGER_HEADLINE.finditer(ledger_text(notebook)))
    return bool(headlines) and not any("FAIL" in h.group("rest") for h in headlines)


def run_once(tmp_path_factory, name: str, parameters: dict, extra_cells: Sequence[str] = (), *,
             defaults: dict | None = None, before_checks: Sequence[str] = ()) -> tuple[nbformat.NotebookNode, Path]:
    """One run for several tests (call it from a fixture of module scope): `run` in a folder and a workspace root of
    its own. Returns the executed notebook and that workspace root. Put several exercises' solutions in one run only
    where they cannot change each other's output (each in its own cell, with its own names, working on its own files
    or reading before another writes), and say so in the fixture's docstring; tests/conftest.py keeps the tests that
    share the fixture on one worker."""
    folder = tmp_path_factory.mktemp(Path(name).stem)
    root = folder / "workspace"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKBOOK_WORKSPACE_ROOT", str(root))
        notebook = run(name, folder, parameters, extra_cells, defaults=defaults, before_checks=before_checks)
    return notebook, root.resolve()


def cell_stdout(notebook: nbformat.NotebookNode, source: str) -> str:
    """What the last code cell whose source is `source` printed (its stdout)."""
    (cell, *_) = [c for c in reversed(notebook.cells) if c.cell_type == "code" and c.source == source]
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


# --- the class replay (tests/conftest.py's `series_replay` fixture) ---------------------------------------------------

# The replay runs without AWS credentials: the local Bedrock path needs none, and none may leak into it.
NO_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK")


def replay_command(*args: str, env: dict | None = None, drop: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess:
    """`python -m companion.replay --no-progress *args` in the repository, with `env` added and `drop` removed."""
    environment = {name: value for name, value in {**os.environ, **(env or {})}.items() if name not in drop}
    return subprocess.run(
        [sys.executable, "-m", "companion.replay", "--no-progress", *args],
        cwd=REPO, capture_output=True, text=True, timeout=900, env=environment, **kwargs,
    )


def digests(paths) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def replayed(series_replay, name: str, parameters: dict) -> tuple[nbformat.NotebookNode, Path]:
    """Notebook `name` as the session's class replay executed it (paraphrase voice, local Bedrock path), and its
    workspace folder. `parameters` are those of the run the calling test needs: classes/sample.yaml must give them, so
    a class file changed for another reason names the test that reads its run instead of failing on a number."""
    from companion.replay import load_class_file, plan_replay

    out, result = series_replay[0], series_replay[1]
    (plan,) = plan_replay([name[:2]], load_class_file(SAMPLE), "offline")[0]
    given = {key: plan.given.get(key, "(not given)") for key in parameters}
    assert given == parameters, f"classes/sample.yaml gives {plan.name} {plan.given}; this test reads its run with {parameters}"
    path = out / name
    assert path.is_file(), f"the class replay did not write {name}: {result.stdout[-1500:]}{result.stderr[-1500:]}"
    notebook = nbformat.read(path, as_version=4)
    workspace = plan.parameters.get("workspace") or Path(name).stem
    return notebook, out / "workspace" / workspace
