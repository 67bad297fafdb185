"""Looking at what a session manager wrote: trees with byte sizes, agent.json's blocks, corrupt-file checks."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .workspace import check_session_id

AGENT_JSON_BLOCKS = ("state", "conversation_manager_state", "_internal_state")


class CorruptSessionError(RuntimeError):
    """A session file that is not the JSON a session manager wrote; nothing is deleted."""


def tree(path: str | os.PathLike, relative_to: str | os.PathLike | None = None) -> str:
    """A directory as an indented tree with each file's size in bytes, paths shown relative to `relative_to`."""
    top = Path(path)
    shown = top.relative_to(relative_to).as_posix() if relative_to else top.name
    if not top.exists():
        return f"{shown}/  (does not exist)"
    lines = [f"{shown}/"]

    def walk(directory: Path, prefix: str) -> None:
        children = sorted(directory.iterdir(), key=_natural_key)
        for index, child in enumerate(children):
            last = index == len(children) - 1
            branch, extend = ("└── ", "    ") if last else ("├── ", "│   ")
            if child.is_dir() and not child.is_symlink():
                lines.append(f"{prefix}{branch}{child.name}/")
                walk(child, prefix + extend)
            else:
                lines.append(f"{prefix}{branch}{child.name}  ({child.stat().st_size:,} bytes)")

    walk(top, "")
    return "\n".join(lines)


def _natural_key(path: Path) -> list[Any]:
    """Sort message_2 before message_10."""
    return _natural(path.name)


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _path_key(path: Path) -> list[list[Any]]:
    return [_natural(part) for part in path.parts]


def files_with_sizes(path: str | os.PathLike) -> dict[str, int]:
    """Every file under `path`, as a relative POSIX path mapped to its size in bytes."""
    top = Path(path)
    if not top.exists():
        return {}
    found = sorted((p for p in top.rglob("*") if p.is_file()), key=_path_key)
    return {p.relative_to(top).as_posix(): p.stat().st_size for p in found}


def session_dir(storage_dir: str | os.PathLike, session_id: str) -> Path:
    """Where FileSessionManager keeps a session: <storage_dir>/session_<id>."""
    return Path(storage_dir) / f"session_{check_session_id(session_id)}"


def agent_dir(storage_dir: str | os.PathLike, session_id: str, agent_id: str = "default") -> Path:
    """Where FileSessionManager keeps one agent of a session."""
    return session_dir(storage_dir, session_id) / "agents" / f"agent_{check_session_id(agent_id)}"


def message_files(storage_dir: str | os.PathLike, session_id: str, agent_id: str = "default") -> list[Path]:
    """The agent's message files in message order (one file per message)."""
    folder = agent_dir(storage_dir, session_id, agent_id) / "messages"
    return sorted(folder.glob("message_*.json"), key=_natural_key) if folder.exists() else []


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    """Read one session file, or say which file is damaged and what to do, without touching it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise CorruptSessionError(
            f"{path} is not valid JSON ({error}). The session cannot be restored from it. "
            "Nothing was deleted: move the file or the session directory aside to keep it, "
            "then start again with a new session id (or reset this notebook's workspace)."
        ) from error
    if not isinstance(data, dict):
        raise CorruptSessionError(f"{path} holds {type(data).__name__}, not a JSON object. Nothing was deleted.")
    return data


def check_session(storage_dir: str | os.PathLike, session_id: str) -> int:
    """Check that every JSON file of a session parses, before a session manager tries to restore it.

    Returns the number of files checked; raises CorruptSessionError naming the first damaged file.
    """
    folder = session_dir(storage_dir, session_id)
    files = sorted(folder.rglob("*.json"), key=_path_key) if folder.exists() else []
    for path in files:
        read_json(path)
    return len(files)


def agent_json_blocks(path: str | os.PathLike) -> dict[str, Any]:
    """The three memory blocks of an agent.json: application state, window bookkeeping, internal state."""
    data = read_json(path)
    missing = [block for block in AGENT_JSON_BLOCKS if block not in data]
    if missing:
        raise CorruptSessionError(f"{path} has no {', '.join(missing)} block: it is not an agent.json. Nothing was deleted.")
    return {block: data[block] for block in AGENT_JSON_BLOCKS}


def show_agent_json(path: str | os.PathLike) -> str:
    """agent.json's three blocks, one after another, without the timestamps that change every run."""
    parts = []
    for block, value in agent_json_blocks(path).items():
        parts.append(f"{block}:\n{json.dumps(value, indent=2, sort_keys=True)}")
    return "\n\n".join(parts)
