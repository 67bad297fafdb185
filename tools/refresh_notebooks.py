"""Re-execute notebooks in place so their committed outputs match what nbval will compute.

Usage: .venv/bin/python tools/refresh_notebooks.py [notebooks/NN_name.ipynb ...]   (default: all of them)
Each notebook runs from notebooks/ on the workbook kernel with the offline model, exactly as `make test` runs it;
run-specific metadata (execution timestamps) is dropped so that a refresh changes only what really changed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def refresh(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(notebook, path)
    print(f"refreshed {path.name}")


if __name__ == "__main__":
    os.environ["WORKBOOK_BACKEND"] = "offline"
    targets = [Path(arg).resolve() for arg in sys.argv[1:]] or sorted(NOTEBOOKS.glob("*.ipynb"))
    for target in targets:
        refresh(target)
