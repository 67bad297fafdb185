"""Looking at what a session manager wrote: trees with byte sizes, agent.json's blocks, corrupt-file checks."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from companion.support.workspace import check_session_id

AGENT_JSON_BLOCKS = ("state", "conversation_manager_state", "_internal_state")


class CorruptSessionError(RuntimeError):
    """A session file that is not the JSON a session manager wrote; nothing is deleted."""


def tree(path: str | os.PathLike, relative_to: str | os.PathLike | None = None, *, sizes: bool = True) -> str:
    """A directory as an indented tree with each file's size in bytes, paths shown relative to `relative_to`.

    `sizes=False` lists the names only, for a notebook whose outputs are compared from run to run: an assistant
    message's file can change size between two runs (see :func:`message_rows`)."""
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
                size = f"  ({child.stat().st_size:,} bytes)" if sizes else ""
                lines.append(f"{prefix}{branch}{child.name}{size}")

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


def block_kind(block: dict[str, Any]) -> str:
    """A content block in a few words: "text", "toolUse search_memory", "toolResult error"."""
    if "toolUse" in block:
        return f"toolUse {block['toolUse'].get('name', '?')}"
    if "toolResult" in block:
        return f"toolResult {block['toolResult'].get('status', '?')}"
    return next(iter(block), "(empty)")


def message_rows(storage_dir: str | os.PathLike, session_id: str, agent_id: str = "default") -> list[dict[str, Any]]:
    """One row per message file, read from disk: its name, the message's role and its block kinds.

    No size column: the SDK writes `timeToFirstByteMs` into an assistant message only when the first byte took 1 ms or
    more, so the same message's file is some 30 bytes longer on a loaded machine (a cold process's first call often is)."""
    rows = []
    for path in message_files(storage_dir, session_id, agent_id):
        message = read_json(path)["message"]
        rows.append({"file": path.name, "role": message["role"],
                     "blocks": ", ".join(block_kind(block) for block in message["content"])})
    return rows


_KEEP = (
    "Nothing was deleted: move the file or the session directory aside to keep it, then start again with a new "
    "session id (or reset this notebook's workspace)."
)
_MESSAGE_FILE = re.compile(r"message_(\d+)\.json")


def _corrupt(path: Path, problem: str) -> CorruptSessionError:
    return CorruptSessionError(f"{path} {problem}. The session cannot be restored from it. {_KEEP}")


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    """Read one session file, or say which file is damaged and what to do, without touching it."""
    path = Path(path)
    if path.is_symlink():
        raise _corrupt(
            path,
            f"is a symbolic link (to {os.readlink(path)}{', which does not exist' if not path.exists() else ''}); "
            "the SDK's FileSessionManager refuses to read through one",
        )
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise _corrupt(path, f"cannot be read ({error.strerror or error})") from error
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _corrupt(path, f"is not UTF-8 text (byte {raw[error.start]:#04x} at offset {error.start})") from error
    try:
        data = json.loads(text)
    except ValueError as error:
        raise CorruptSessionError(
            f"{path} is not valid JSON ({error}). The session cannot be restored from it. {_KEEP}"
        ) from error
    if not isinstance(data, dict):
        raise CorruptSessionError(f"{path} holds {type(data).__name__}, not a JSON object. Nothing was deleted.")
    return data


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number", bool: "true/false",
            type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _require(path: Path, data: dict[str, Any], field: str, kind: type | tuple[type, ...], *, optional: bool = False) -> None:
    """Refuse a missing field or one of the wrong JSON type, naming the file and the field."""
    if field not in data:
        if optional:
            return
        raise _corrupt(path, f"has no field {field!r}")
    value = data[field]
    wanted = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
        names = " or ".join(_kind(t()) if t is not type(None) else "null" for t in wanted)
        raise _corrupt(path, f"has field {field!r} as {_kind(value)}, where the SDK expects {names}")


def _check_message(path: Path, data: dict[str, Any]) -> None:
    _require(path, data, "message_id", int)
    _require(path, data, "message", dict)
    _require(path, data, "redact_message", (dict, type(None)), optional=True)
    for field in ("message", "redact_message"):
        message = data.get(field)
        if message is None:
            continue
        if message.get("role") not in ("user", "assistant"):
            raise _corrupt(path, f"has field '{field}.role' = {message.get('role')!r}, where the SDK expects 'user' or 'assistant'")
        content = message.get("content")
        if not isinstance(content, list):
            raise _corrupt(path, f"has field '{field}.content' as {_kind(content)}, where the SDK expects a list of blocks")
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                raise _corrupt(path, f"has field '{field}.content[{index}]' as {_kind(block)}, where the SDK expects an object")


def check_file_shape(path: str | os.PathLike, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check that a session file has the fields FileSessionManager reads, with their JSON types; returns the data."""
    path = Path(path)
    data = read_json(path) if data is None else data
    if path.name == "session.json":
        _require(path, data, "session_id", str)
        _require(path, data, "session_type", str)
    elif path.name == "agent.json":
        _require(path, data, "agent_id", str)
        _require(path, data, "state", dict)
        _require(path, data, "conversation_manager_state", dict)
        _require(path, data, "_internal_state", dict, optional=True)
    elif path.parent.name == "messages":
        if not _MESSAGE_FILE.fullmatch(path.name):
            raise _corrupt(path, "has a file name the SDK cannot read: message files are named message_<number>.json")
        _check_message(path, data)
    for field in ("created_at", "updated_at"):
        _require(path, data, field, str, optional=True)
    return data


def check_session(storage_dir: str | os.PathLike, session_id: str) -> int:
    """Check every file of a session before a session manager tries to restore it: each must be a regular file (no
    symbolic link), UTF-8 JSON, with the fields the SDK reads and their types.

    Returns the number of files checked; raises CorruptSessionError naming the first damaged file (and field).
    """
    folder = session_dir(storage_dir, session_id)
    if folder.is_symlink():
        raise _corrupt(folder, "is a symbolic link; the session directory must be a real directory")
    found = sorted(folder.rglob("*"), key=_path_key) if folder.exists() else []
    for path in found:
        if path.is_symlink():
            read_json(path)  # raises, naming the link
    files = [path for path in found if path.name.endswith(".json") and path.is_file()]
    for path in files:
        check_file_shape(path)
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
