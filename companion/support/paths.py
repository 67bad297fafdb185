"""Where the repository's folders are, computed once, so modules and notebooks never climb `__file__` themselves."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
DATA_DIR = REPO_ROOT / "data"


def data_path(*parts: str) -> Path:
    """A file or folder under data/, e.g. data_path("conversations", "codename.json"); raises if it is missing,
    naming the path, because a missing data file is an incomplete checkout, not a lesson."""
    path = DATA_DIR.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the workbook's data/ folder is incomplete (re-clone or `git status`).")
    return path
