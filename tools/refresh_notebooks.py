"""Re-execute notebooks in place so their committed outputs match what nbval will compute.

Usage: .venv/bin/python tools/refresh_notebooks.py [notebooks/NN_name.ipynb ...]   (default: all of them)
Each notebook runs from notebooks/ on the workbook kernel with the offline model, exactly as `make test` runs it;
run-specific metadata (execution timestamps) is dropped so that a refresh changes only what really changed.

The file is written in the form JupyterLab writes, so that opening and saving it in JupyterLab changes nothing
(`git status` stays clean): nbformat 4.5 with cell ids, one-space indentation and a trailing newline (nbformat's
writer, which the Jupyter server uses too); consecutive stream outputs of one name merged and carriage returns and
backspaces applied, as JupyterLab's output area does on load; whole-number floats written as integers (`-2.0` becomes
`-2`, as a JavaScript round trip does). No widget is stored: a widget's output is dropped (its state would hold
new model ids on every run and reload as "model not found"; a line standing in for it would be an output the
cell's code never prints), so a slider cell shows what its code printed, and the slider when the reader runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbformat.corpus.words import generate_corpus_id

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
RECORDS = REPO / "tests" / "records"
sys.path.insert(0, str(REPO))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _fix_carriage_returns(text: str) -> str:
    """What JupyterLab shows for text with '\\r' (a line overwritten in place) and '\\b' (a character erased)."""
    if "\b" in text:
        previous = None
        while previous != text:
            previous, text = text, re.sub(r"[^\n]\x08", "", text)
    if "\r" in text:
        text = re.sub(r"\r+\n", "\n", text)
        lines = []
        for line in text.split("\n"):
            shown = ""
            for part in line.split("\r"):
                shown = part + shown[len(part):]
            lines.append(shown)
        text = "\n".join(lines)
    return text


def _integral_floats_as_ints(value: Any) -> Any:
    """A JavaScript JSON round trip: 2.0 is written back as 2."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral_floats_as_ints(item) for item in value]
    return value


def _merged_outputs(outputs: list) -> list:
    merged: list = []
    for output in outputs:
        if output.get("output_type") == "stream":
            text = output["text"] if isinstance(output["text"], str) else "".join(output["text"])
            last = merged[-1] if merged else None
            if last is not None and last.get("output_type") == "stream" and last.get("name") == output.get("name"):
                last["text"] = _fix_carriage_returns(last["text"] + text)
                continue
            output["text"] = _fix_carriage_returns(text)
        if WIDGET_VIEW in output.get("data", {}):
            continue
        merged.append(output)
    return merged


def jupyterlab_form(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook as JupyterLab would save it (see the module's docstring); changes it in place and returns it."""
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        if not cell.get("id"):
            cell["id"] = generate_corpus_id()
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = _merged_outputs(cell.outputs)
    return nbformat.from_dict(_integral_floats_as_ints(notebook))


def write(notebook: nbformat.NotebookNode, path: Path) -> None:
    """Write with nbformat's writer, as the Jupyter server does: one-space indent, sorted keys, trailing newline."""
    nbformat.write(jupyterlab_form(notebook), path, version=nbformat.NO_CONVERT)


def keep_record(path: Path, since: float) -> None:
    """Copy the run's record (companion/checks: what "Check yourself" decided its ledger on) from the notebook's
    default workspace, which is named after it, to tests/records/, where the checks' tests read it."""
    from companion.checks import RECORD_NAME
    from companion.support.workspace import workspace_root

    record = workspace_root() / path.stem / RECORD_NAME
    if record.is_file() and record.stat().st_mtime >= since:
        RECORDS.mkdir(exist_ok=True)
        shutil.copyfile(record, RECORDS / f"{path.stem}.json")


def refresh(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    started = time.time()
    NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        # nbclient's output-widget hook raises KeyError without widget state when an `interactive` widget prints;
        # the state is collected here and dropped again by jupyterlab_form before writing.
        store_widget_state=True,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    ).execute()
    write(notebook, path)
    if path.parent == NOTEBOOKS:
        keep_record(path, started)
    print(f"refreshed {path.name}")


if __name__ == "__main__":
    os.environ["WORKBOOK_BACKEND"] = "offline"
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"
    targets = [Path(arg).resolve() for arg in sys.argv[1:]] or sorted(NOTEBOOKS.glob("*.ipynb"))
    for target in targets:
        refresh(target)
