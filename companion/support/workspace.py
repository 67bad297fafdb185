"""Each notebook's own workspace directory, and the guard that keeps every write inside the workbook's root.

The rules, checked before anything is created or deleted:

- The root is $WORKBOOK_WORKSPACE_ROOT, else `workspace/` in the repository. It must be a real directory, not a
  symbolic link (a linked root would let a reset delete whatever it points at), and one the workbook owns: the
  repository's `workspace/`, or a directory that is new, empty, or holds nothing but workspaces the workbook made.
  The workbook marks each workspace it makes with a small file, `.workbook-workspace`, inside it; a configured root
  with anything else in it (your home directory, `/`, a project folder) is refused, and nothing in it is touched.
- A workspace is named by one plain name (letters, digits, '-', '_', '.', starting with a letter or digit: no path
  separators, no '..'), or given as a path inside the root (e.g. `workspace_dir / "widget"`) whose every part is
  such a name. No part of the path may be a symbolic link: a reset never follows one.
- A reset deletes only a real directory inside the root (never the root itself) and never follows symbolic links.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from companion.support.paths import REPO_ROOT

WORKSPACE_ROOT_ENV = "WORKBOOK_WORKSPACE_ROOT"
REPOSITORY_WORKSPACE = REPO_ROOT / "workspace"
MARKER = ".workbook-workspace"
MARKER_TEXT = "This directory is a workspace of the agent-memory workbook; resetting the notebook deletes it.\n"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
_NOTHING_DONE = "Nothing was written or deleted."


class UnsafePathError(ValueError):
    """A path or id that would lead outside the workbook's workspace root."""


def _safe_name(name: object) -> bool:
    return isinstance(name, str) and _SAFE_ID.fullmatch(name) is not None and ".." not in name


def _configured_root() -> tuple[Path, bool]:
    """The root as configured (absolute, symbolic links not resolved) and whether it came from the environment."""
    configured = os.environ.get(WORKSPACE_ROOT_ENV)
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured))), True
    return REPOSITORY_WORKSPACE, False


def _where(from_environment: bool) -> str:
    return f"${WORKSPACE_ROOT_ENV}" if from_environment else "the repository's workspace/"


def workspace_root() -> Path:
    """Where every notebook's workspace lives: $WORKBOOK_WORKSPACE_ROOT, else `workspace/` in the repository."""
    root, _ = _configured_root()
    return root.resolve()


def _checked_root(root: Path | None) -> tuple[Path, bool]:
    """The resolved root, after refusing a symbolic link or a non-directory; and whether ownership must be proven."""
    if root is not None:
        given, from_environment = Path(os.path.abspath(root)), True
    else:
        given, from_environment = _configured_root()
    if given.is_symlink():
        raise UnsafePathError(
            f"The workspace root {given} ({_where(from_environment)}) is a symbolic link to {os.path.realpath(given)}: "
            f"a reset through it could delete files elsewhere. Use a real directory. {_NOTHING_DONE}"
        )
    if given.exists() and not given.is_dir():
        raise UnsafePathError(f"The workspace root {given} (${WORKSPACE_ROOT_ENV}) is not a directory. {_NOTHING_DONE}")
    resolved = given.resolve()
    repository = not given.is_symlink() and resolved == REPOSITORY_WORKSPACE.resolve() and not REPOSITORY_WORKSPACE.is_symlink()
    return resolved, not repository


def _check_owned(root: Path, own_entry: str | None, *, deleting: bool) -> None:
    """Refuse a configured root holding anything but workspaces the workbook made.

    The entry a path leads into is not held to that when writing into it or resetting a folder inside it (e.g. a
    session directory a subprocess created with `inside_root`); a workspace itself is deleted only if it is marked.
    """
    if not root.exists():
        return
    for entry in sorted(root.iterdir()):
        if entry.name == own_entry and not deleting:
            continue
        if entry.is_dir() and not entry.is_symlink() and (entry / MARKER).is_file():
            continue
        raise UnsafePathError(
            f"Refusing to use {root} as the workspace root (${WORKSPACE_ROOT_ENV}): it holds {entry.name!r}, which the "
            "workbook did not make. A configured root must be a new or empty directory, or one that holds only "
            f"workbook workspaces (each with a {MARKER} file). Point ${WORKSPACE_ROOT_ENV} at a new directory, or unset "
            f"it to use the repository's workspace/. {_NOTHING_DONE}"
        )


def _relative_parts(path: str | os.PathLike, root: Path, configured: Path) -> tuple[str, ...]:
    """The parts of `path` below the root, each a safe name; a relative path must be one plain name."""
    refusal = (
        f"Refusing to use {str(path)!r}: a notebook workspace is one plain name such as '01_restart_test' (letters, "
        f"digits, '-', '_' or '.', no path separators, no '..'), or a directory inside {root}. {_NOTHING_DONE}"
    )
    text = os.fspath(path)
    if not isinstance(text, str):
        raise UnsafePathError(refusal)
    candidate = Path(text)
    if not candidate.is_absolute():
        if not _safe_name(text) or "\\" in text:
            raise UnsafePathError(refusal)
        return (text,)
    if ".." in candidate.parts:
        raise UnsafePathError(refusal)
    for base in (root, configured):
        try:
            parts = candidate.relative_to(base).parts
        except ValueError:
            continue
        if parts and all(_safe_name(part) for part in parts):
            return parts
        break
    raise UnsafePathError(refusal)


def _no_symlinks(root: Path, parts: tuple[str, ...]) -> Path:
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise UnsafePathError(
                f"Refusing to use {current}: it is a symbolic link (to {os.path.realpath(current)}), and the workbook "
                f"never follows one inside its workspace. Remove the link. {_NOTHING_DONE}"
            )
        if current.exists() and not current.is_dir():
            raise UnsafePathError(f"Refusing to use {current}: it is a file, not a directory. {_NOTHING_DONE}")
    return current


def _target(path: str | os.PathLike, root: Path | None, *, deleting: bool) -> tuple[Path, Path, tuple[str, ...], bool]:
    resolved_root, must_own = _checked_root(root)
    configured = Path(os.path.abspath(root)) if root is not None else _configured_root()[0]
    parts = _relative_parts(path, resolved_root, configured)
    target = _no_symlinks(resolved_root, parts)
    if must_own:
        _check_owned(resolved_root, parts[0], deleting=deleting and len(parts) == 1)
    return target, resolved_root, parts, must_own


def check_session_id(session_id: str) -> str:
    """Refuse a session id that could name a path outside the session directory (separators, "..", dotfiles)."""
    if not _safe_name(session_id):
        raise UnsafePathError(
            f"Unsafe session id {session_id!r}: use 1-128 letters, digits, '-', '_' or '.', starting with a letter "
            "or digit, with no path separators, no '..' and no line breaks. Example: 'restart-demo'."
        )
    return session_id


def inside_root(path: str | os.PathLike, root: Path | None = None) -> Path:
    """A workspace path (a plain name, or a path inside the root) after every check above; refuses anything else."""
    return _target(path, root, deleting=False)[0]


def reset_workspace(path: str | os.PathLike, root: Path | None = None) -> Path:
    """Empty and re-create a notebook's workspace so that Restart & Run All starts from nothing.

    Only a real directory strictly inside an owned workspace root is ever deleted (see the module's rules).
    """
    target, resolved_root, parts, _ = _target(path, root, deleting=True)
    if target.exists():
        shutil.rmtree(target)  # refuses a symbolic link itself and unlinks (never follows) the ones inside
    resolved_root.mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True)
    top = resolved_root / parts[0]
    if not (top / MARKER).exists():
        (top / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    return target
