"""A session killed in the middle of a tool call, and the repair of its files before a restore (notebook 01).

A process killed while a tool runs leaves the assistant's `toolUse` as the last message file, with no `toolResult`
after it. strands-agents 1.62 repairs broken tool pairs on restore but leaves the trailing message to
`Agent._convert_prompt_to_messages`, which, when the next prompt arrives, appends a user message with an error
`toolResult` and then the prompt as a second user message. Bedrock's Converse API refuses two user messages in a row
("A conversation must alternate between user and assistant roles..."), so that session can never be resumed there.

:func:`repair_interrupted_tool_use` fixes the files before the restore, through the SDK's own session repository:
it writes the missing `toolResult` (status error, "Tool was interrupted.", the content the SDK itself writes) and an
assistant message that says so, and touches no file that was already there.

A toolUse can be left unanswered anywhere, not only last (a crash, then a later turn written by code that did not
repair it): the SDK's restore then inserts a user toolResult before the next user message, two user messages in a
row that Bedrock refuses. The repair answers every one: a trailing one with the two new messages above, one in the
middle by adding the error `toolResult` blocks to the user message that follows it (the one file it changes, through
the SDK's repository). A toolUse followed by another assistant message cannot be answered without renumbering the
files: that is refused, naming both files, before anything is written.

Like forget() (companion/measure/forgetting.py), the repair writes its plan first (`repair_plan_path`: every message
it will write, whole), then applies it; a failure part way raises `PartialRepairError` naming what is done and what
is left, and a rerun reads the plan and finishes it.

:func:`run_until_it_dies` runs a program that is meant to crash (notebook 02's dies with `os._exit` between two
calls) and returns its exit status instead of raising.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
import tempfile
from collections.abc import AsyncIterable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from companion.models.model_wrapper import WrappedModel
from companion.sessions.session_files import (
    CorruptSessionError,
    agent_dir,
    check_session,
    message_files,
    read_json,
    session_dir,
)
from companion.support.workspace import check_session_id

if TYPE_CHECKING:
    from companion.sessions.restart_runner import ProgramRun

__all__ = ["INTERRUPTED_REPLY", "PartialRepairError", "RepairRefusedError", "RequestLog", "digests",
           "repair_interrupted_tool_use", "repair_plan_path", "sdk_excerpt", "trailing_tool_use_ids",
           "run_until_it_dies", "unanswered_tool_uses"]

INTERRUPTED_REPLY = "My tool call was interrupted before it returned, so I have no result from it."
"""The assistant message the repair writes after the error result, so that user and assistant alternate."""


class RepairRefusedError(RuntimeError):
    """The session's files cannot be repaired as they are (the message names the files); nothing was written."""


class PartialRepairError(RuntimeError):
    """A write of the repair failed part way: `done` and `left` are the message files. The plan stays on disk;
    running the repair again finishes it."""

    def __init__(self, done: list[Path], left: list[Path], error: BaseException) -> None:
        self.done, self.left, self.error = done, left, error
        names = ", ".join(p.name for p in left)
        super().__init__(f"The crash repair stopped at {left[0].name}: {error}. Written: "
                         f"{', '.join(p.name for p in done) or 'none'}; left: {names}. Run the repair again to finish "
                         "(its plan is kept).")


def _tool_use_ids(path: Path, message: dict[str, Any]) -> list[str]:
    """The toolUse ids of a message, in order; a toolUse block without one is a CorruptSessionError naming the file
    (no toolResult could ever answer it)."""
    ids = []
    for number, block in enumerate(message.get("content") or [], start=1):
        if not isinstance(block, dict) or "toolUse" not in block:
            continue
        use = block["toolUse"]
        tool_use_id = use.get("toolUseId") if isinstance(use, dict) else None
        if not isinstance(tool_use_id, str) or not tool_use_id:
            name = use.get("name") if isinstance(use, dict) else None
            raise CorruptSessionError(f"{path}: content block {number} is a toolUse ({name!r}) with no toolUseId, so "
                                      "no toolResult can answer it. Nothing was written.")
        ids.append(tool_use_id)
    return ids


def trailing_tool_use_ids(storage_dir: str | os.PathLike, session_id: str, agent_id: str = "default") -> list[str]:
    """The toolUse ids of the session's last message when it is the assistant's and has toolUse blocks, else []."""
    check_session_id(session_id)
    files = message_files(storage_dir, session_id, agent_id)
    if not files:
        return []
    message = read_json(files[-1])["message"]
    if message.get("role") != "assistant":
        return []
    return _tool_use_ids(files[-1], message)


def _answered(message: dict[str, Any]) -> set[str]:
    return {block["toolResult"].get("toolUseId") for block in message.get("content") or []
            if isinstance(block, dict) and isinstance(block.get("toolResult"), dict)}


def unanswered_tool_uses(storage_dir: str | os.PathLike, session_id: str,
                         agent_id: str = "default") -> list[tuple[str, list[str]]]:
    """Every assistant message file with toolUse ids that the next message does not answer with a toolResult, and
    those ids (a trailing toolUse: all of its ids)."""
    check_session_id(session_id)
    files = message_files(storage_dir, session_id, agent_id)
    messages = [read_json(path)["message"] for path in files]
    found = []
    for index, (path, message) in enumerate(zip(files, messages, strict=True)):
        if message.get("role") != "assistant":
            continue
        ids = _tool_use_ids(path, message)
        answered = _answered(messages[index + 1]) if index + 1 < len(messages) else set()
        if [i for i in ids if i not in answered]:
            found.append((path.name, [i for i in ids if i not in answered]))
    return found


def repair_plan_path(storage_dir: str | os.PathLike, session_id: str, agent_id: str = "default") -> Path:
    """Where the repair keeps its plan while it runs (in the agent's folder; not a .json file, so no reader of the
    session takes it for one of the SDK's)."""
    return agent_dir(storage_dir, session_id, agent_id) / "crash-repair.plan"


def _plan(storage_dir: str | os.PathLike, session_id: str, agent_id: str, reply: str) -> list[dict[str, Any]]:
    """The repair's steps, each a whole message file to create or update (as the SDK's SessionMessage dict)."""
    from strands.tools._tool_helpers import generate_missing_tool_result_content
    from strands.types.content import _ensure_tracking_id
    from strands.types.session import SessionMessage

    files = message_files(storage_dir, session_id, agent_id)
    data = [read_json(path) for path in files]
    steps: list[dict[str, Any]] = []
    for index, path in enumerate(files):
        message = data[index]["message"]
        if message.get("role") != "assistant":
            continue
        ids = _tool_use_ids(path, message)
        if not ids or index == len(files) - 1:
            continue
        following = data[index + 1]
        if following["message"].get("role") != "user":
            raise RepairRefusedError(
                f"{path} holds the assistant's toolUse {ids}, and the next file, {files[index + 1].name}, is another "
                "assistant message, not the user's toolResult: it cannot be answered without renumbering the files. "
                "Nothing was written.")
        blocks = following["message"].get("content") or []
        results = {b["toolResult"].get("toolUseId"): b for b in blocks
                   if isinstance(b, dict) and isinstance(b.get("toolResult"), dict)}
        if all(i in results for i in ids):
            continue
        content = [results.get(i) or generate_missing_tool_result_content([i])[0] for i in ids]
        content += [b for b in blocks if not (isinstance(b, dict) and isinstance(b.get("toolResult"), dict)
                                              and b["toolResult"].get("toolUseId") in ids)]
        updated = copy.deepcopy(following)
        updated["message"]["content"] = content
        steps.append({"file": files[index + 1].name, "action": "update", "session_message": updated})
    tool_use_ids = trailing_tool_use_ids(storage_dir, session_id, agent_id)
    if tool_use_ids:
        last_id = data[-1]["message_id"]
        added = [
            {"role": "user", "content": generate_missing_tool_result_content(tool_use_ids)},
            {"role": "assistant", "content": [{"text": reply}]},
        ]
        for offset, message in enumerate(added, start=1):
            _ensure_tracking_id(message)  # the durable id the agent gives every message it appends
            steps.append({"file": f"message_{last_id + offset}.json", "action": "create",
                          "session_message": SessionMessage.from_message(message, last_id + offset).to_dict()})
    return steps


def _write_plan(path: Path, session_id: str, agent_id: str, steps: list[dict[str, Any]]) -> None:
    """The plan, whole, on disk before the first write (a new file renamed into place)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".crash-repair_", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump({"session_id": session_id, "agent_id": agent_id, "steps": steps}, file, ensure_ascii=False)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _read_plan(path: Path, session_id: str, agent_id: str) -> list[dict[str, Any]]:
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
        steps = plan["steps"]
        if plan.get("session_id") != session_id or plan.get("agent_id") != agent_id or not isinstance(steps, list):
            raise ValueError("it names another session")
        for step in steps:
            if step["action"] not in ("create", "update") or not isinstance(step["session_message"], dict):
                raise ValueError(f"a step is {step!r:.80}")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CorruptSessionError(f"{path}: the plan an interrupted repair left cannot be read ({error}); nothing "
                                  "was written. Move it aside and check the session's files.") from None
    return steps


def _apply_step(repository: Any, session_id: str, agent_id: str, step: dict[str, Any]) -> None:
    """Write one message file of the plan through the SDK's repository (a rerun writes it again, the same)."""
    from strands.types.session import SessionMessage

    message = SessionMessage.from_dict(step["session_message"])
    if step["action"] == "create":
        repository.create_message(session_id, agent_id, message)
    else:
        repository.update_message(session_id, agent_id, message)


def repair_interrupted_tool_use(
    storage_dir: str | os.PathLike, session_id: str, agent_id: str = "default", reply: str = INTERRUPTED_REPLY
) -> list[Path]:
    """Answer every toolUse that has no toolResult, in the session's files, before an agent restores them.

    A trailing toolUse: writes two messages with the SDK's own SessionMessage and file repository (each with a
    tracking_id, as the agent gives every message): a user message with one error toolResult per toolUse id ("Tool
    was interrupted.", as the SDK writes it) and an assistant message (`reply`). A toolUse in the middle: adds the
    error toolResults to the user message after it. Returns the files written, in order; [] when every toolUse is
    answered (nothing written). Refuses an unsafe session id (UnsafePathError), a damaged session or a toolUse with
    no id (CorruptSessionError naming the file) and a toolUse followed by another assistant message
    (RepairRefusedError naming both files) before writing anything. The plan is written first
    (`repair_plan_path`); a failed write raises PartialRepairError and a rerun finishes the plan.
    """
    from strands.session import FileSessionManager

    check_session_id(session_id)
    check_session_id(agent_id)
    if not session_dir(storage_dir, session_id).is_dir():
        raise FileNotFoundError(f"No session {session_id!r} in {storage_dir}: nothing to repair, nothing written.")
    check_session(storage_dir, session_id)  # every file parses and has the SDK's fields, or the damaged one is named
    plan_path = repair_plan_path(storage_dir, session_id, agent_id)
    if plan_path.is_file():  # an interrupted repair: finish its plan
        steps = _read_plan(plan_path, session_id, agent_id)
    else:
        steps = _plan(storage_dir, session_id, agent_id, reply)
        if not steps:
            return []
        _write_plan(plan_path, session_id, agent_id, steps)
    # FileSessionManager is also the SDK's file repository; on an existing session, creating one writes nothing
    repository = FileSessionManager(session_id=session_id, storage_dir=str(storage_dir))
    messages = plan_path.parent / "messages"
    paths = [messages / step["file"] for step in steps]
    for number, step in enumerate(steps):
        try:
            _apply_step(repository, session_id, agent_id, step)
        except Exception as error:
            raise PartialRepairError(paths[:number], paths[number:], error) from error
    plan_path.unlink()
    return paths


def digests(paths: list[Path]) -> dict[str, str]:
    """File name -> SHA-256 of its bytes: to show that a file was not changed."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def sdk_excerpt(function: Callable[..., Any], start: str, stop: str) -> str:
    """The lines of an SDK function from the first containing `start` to the next containing `stop`, numbered as in
    its file (so a reader can find them)."""
    lines, first = inspect.getsourcelines(function)
    begin = next(i for i, line in enumerate(lines) if start in line)
    end = next(i for i in range(begin, len(lines)) if lines[i].strip().startswith(stop))
    source = Path(inspect.getsourcefile(function) or "?")
    parts = source.parts
    shown = "/".join(parts[parts.index("strands"):]) if "strands" in parts else source.name
    width = min(len(line) - len(line.lstrip()) for line in lines[begin:end + 1] if line.strip())
    body = [f"{first + i:5}  {lines[i][width:].rstrip()}" for i in range(begin, end + 1)]
    return "\n".join([f"{shown}, {function.__qualname__}:", *body])


class RequestLog(WrappedModel):
    """Wraps any Strands model and keeps a copy of the messages of every call, as the model received them."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.requests: list[Messages] = []

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        self.requests.append(copy.deepcopy(messages))
        async for event in self.inner.stream(messages, tool_specs, system_prompt, **kwargs):
            yield event


def run_until_it_dies(program: str | os.PathLike, *args: object, timeout: float = 300) -> ProgramRun:
    """Run `python <program> <args>` in a new process, as `restart_runner.run_program` does, for a program that is
    meant to die (`os._exit(1)`, a kill): returns its `ProgramRun`, exit status and all, instead of raising.

    A program that exits with status 0 did not crash: that raises `PhaseFailed`, with what it printed. Notebook 02's
    crash program dies this way, between two calls, to show what a restart reads back."""
    import subprocess
    import sys
    from datetime import UTC, datetime

    from companion.sessions.restart_runner import PhaseFailed, ProgramRun, _package_parent
    from companion.support.workspace import inside_root

    given = os.path.abspath(program)
    path = inside_root(os.path.dirname(given)) / os.path.basename(given)
    if path.is_symlink() or not path.is_file():
        raise FileNotFoundError(f"No program file {path}: write it first (nothing was run).")
    arguments = tuple(str(arg) for arg in args)
    env = dict(os.environ, PYTHONPATH=_package_parent(), PYTHONIOENCODING="utf-8")
    started = datetime.now(UTC)
    process = subprocess.Popen([sys.executable, str(path), *arguments], cwd=path.parent, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise PhaseFailed(f"{path.name} did not finish within {timeout} s.\n{stderr}") from None
    if process.returncode == 0:
        raise PhaseFailed(f"{path.name} exited with status 0: it did not die.\n{stdout}{stderr}")
    return ProgramRun(process.pid, str(path), arguments, process.returncode, stdout, stderr, started.isoformat(),
                      datetime.now(UTC).isoformat())
