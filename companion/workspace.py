"""Each notebook's own workspace directory, and the guard that keeps every write inside the workbook's root."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

WORKSPACE_ROOT_ENV = "WORKBOOK_WORKSPACE_ROOT"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class UnsafePathError(ValueError):
    """A path or id that would lead outside the workbook's workspace root."""


def workspace_root() -> Path:
    """Where every notebook's workspace lives: $WORKBOOK_WORKSPACE_ROOT, else `workspace/` in the repository."""
    configured = os.environ.get(WORKSPACE_ROOT_ENV)
    root = Path(configured) if configured else Path(__file__).resolve().parent.parent / "workspace"
    return root.resolve()


def check_session_id(session_id: str) -> str:
    """Refuse a session id that could name a path outside the session directory (separators, "..", dotfiles)."""
    if not isinstance(session_id, str) or not _SAFE_ID.match(session_id) or ".." in session_id:
        raise UnsafePathError(
            f"Unsafe session id {session_id!r}: use 1-128 letters, digits, '-', '_' or '.', starting with a letter "
            "or digit, with no path separators and no '..'. Example: 'restart-demo'."
        )
    return session_id


def inside_root(path: str | os.PathLike, root: Path | None = None) -> Path:
    """Resolve a workspace path (a name or relative path is taken under the root) and refuse one outside it."""
    root = (root or workspace_root()).resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = candidate.resolve()
    if resolved == root or root not in resolved.parents:
        raise UnsafePathError(
            f"Refusing to use {str(path)!r}: a notebook workspace must be a directory inside {root} "
            "(give a name such as '01_restart_test'). Nothing was written or deleted."
        )
    return resolved


def reset_workspace(path: str | os.PathLike, root: Path | None = None) -> Path:
    """Empty and re-create a notebook's workspace so that Restart & Run All starts from nothing.

    Only a directory strictly inside the workspace root is ever deleted.
    """
    target = inside_root(path, root)
    if target.is_symlink():
        raise UnsafePathError(f"Refusing to reset {target}: it is a symbolic link. Nothing was deleted.")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    return target
