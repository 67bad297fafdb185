"""The restart test: one session, two real OS processes that share nothing but a session directory.

Notebook 01 writes its own program to a file (a model, a `FileSessionManager`, an `Agent`, one prompt) and
:func:`run_program` runs that file in a fresh Python interpreter, once per phase; :func:`check_parameters` checks the
notebook's parameters first. `run_phase` does the same with :func:`phase` below, the program the tests use;
:func:`kill_during_tool` runs :func:`tool_phase`, whose tool never returns, and kills it (what a crash in the middle of a
tool call leaves: companion/sessions/crash_repair.py repairs it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from companion.support.paths import REPO_ROOT

DEFAULT_PLANT = "My name is Pin and my favorite number is 42. Just acknowledge, one short sentence."
DEFAULT_RECALL = "What is my name and my favorite number?"


def check_parameters(*, user_name: str, favorite_number: int, session_id: str, other_session_id: str,
                     writers: int) -> None:
    """Notebook 01's parameters: a bad one raises (`ParameterError` or `UnsafePathError`, saying what it must be)
    before anything is written."""
    from companion.support import parameters as check
    from companion.support.workspace import check_session_id

    check.text("user_name", user_name)
    check.integer("favorite_number", favorite_number, minimum=0)
    for name, value in [("session_id", session_id), ("other_session_id", other_session_id)]:
        check_session_id(check.text(name, value))
    check.different(("session_id", "other_session_id"), (session_id, other_session_id),
                    why="the lesson compares two sessions")
    check.integer("writers", writers, minimum=2, maximum=4, why="one fact per writer")


def phase(
    prompt: str | None, backend: str, session_id: str | None, storage_dir: str, window_size: int | None = None
) -> None:
    """One process's whole life: build an agent on the session (if any), send one prompt (if any), print, exit."""
    from strands import Agent
    from strands.agent.conversation_manager import SlidingWindowConversationManager
    from strands.session import FileSessionManager

    from companion.models.backends import make_model

    session_manager = None
    if session_id is not None:
        session_manager = FileSessionManager(session_id=session_id, storage_dir=storage_dir)
    window = SlidingWindowConversationManager(window_size=window_size) if window_size else None
    agent = Agent(
        model=make_model(backend), session_manager=session_manager, conversation_manager=window, callback_handler=None
    )
    print(f"messages restored: {len(agent.messages)}")
    if prompt is None:
        return
    result = agent(prompt)
    print(f"reply: {str(result).strip()}")
    print(f"messages now: {len(agent.messages)}")


def tool_phase(prompt: str, backend: str, session_id: str, storage_dir: str, started_file: str) -> None:
    """A process whose tool never returns: it marks that it started, then sleeps until the process is killed."""
    from strands import Agent, tool
    from strands.session import FileSessionManager

    from companion.models.backends import make_model

    @tool
    def search_memory(query: str) -> str:
        """Search the user's saved memories."""
        Path(started_file).touch()  # by now the model's toolUse is in a message file
        time.sleep(600)  # the parent kills the process long before this returns
        return "[]"

    agent = Agent(model=make_model(backend), tools=[search_memory], callback_handler=None,
                  session_manager=FileSessionManager(session_id=session_id, storage_dir=storage_dir))
    print(f"messages restored: {len(agent.messages)}", flush=True)
    agent(prompt)
    print("the tool returned (it should not have)", flush=True)


@dataclass(frozen=True)
class PhaseResult:
    """What one phase process did: its process id, exit status and everything it printed."""

    pid: int
    returncode: int
    stdout: str
    stderr: str


class PhaseFailed(RuntimeError):
    """A phase process exited with an error; the message carries what it printed to stderr."""


def run_phase(
    prompt: str | None,
    *,
    backend: str,
    session_id: str | None,
    storage_dir: str | os.PathLike,
    window_size: int | None = None,
    timeout: float = 300,
) -> PhaseResult:
    """Run :func:`phase` in a new Python process, working inside `storage_dir`'s parent (the workspace).

    A `prompt` of None only restores the session and reports how many messages came back.
    """
    from companion.support.workspace import check_session_id, inside_root

    # Every argument is checked before anything is created or started.
    storage = inside_root(storage_dir)
    args = [sys.executable, "-m", "companion.sessions.restart_runner", "--backend", backend, "--storage-dir", str(storage)]
    if session_id is not None:
        args += ["--session-id", check_session_id(session_id)]
    if window_size is not None:
        args += ["--window-size", str(int(window_size))]
    storage.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=_package_parent(), PYTHONIOENCODING="utf-8")
    process = subprocess.Popen(
        args + ([] if prompt is None else ["--", prompt]),
        cwd=storage.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise PhaseFailed(f"The phase process did not finish within {timeout} s.\n{stderr}") from None
    if process.returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "(no error output)"
        raise PhaseFailed(f"The phase process exited with status {process.returncode}: {last}\n\n{stderr}")
    return PhaseResult(process.pid, process.returncode, stdout, stderr)


@dataclass(frozen=True)
class ProgramRun:
    """One run of a program file in a process of its own: its process id, the program's path and its arguments, its
    exit status, what it printed, and the UTC times (ISO 8601) taken just before it started and just after it ended."""

    pid: int
    program: str
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    started: str
    ended: str


def run_program(program: str | os.PathLike, *args: object, timeout: float = 300) -> ProgramRun:
    """Run `python <program> <args>` in a new process, in the program's folder, and wait for it to exit.

    The program must be a file inside the workspace root. Each argument is passed as its `str`. The process gets the
    kernel's environment, with the workbook on its import path; it shares no variable with the caller. A process that
    exits with an error raises PhaseFailed, with what it printed to stderr.
    """
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
    ended = datetime.now(UTC)
    if process.returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "(no error output)"
        raise PhaseFailed(f"{path.name} exited with status {process.returncode}: {last}\n\n{stderr}")
    return ProgramRun(process.pid, str(path), arguments, process.returncode, stdout, stderr, started.isoformat(),
                      ended.isoformat())


def kill_during_tool(
    prompt: str, *, backend: str, session_id: str, storage_dir: str | os.PathLike, timeout: float = 120
) -> PhaseResult:
    """Run :func:`tool_phase` in a new process, wait until its tool has started, and kill the process (SIGKILL).

    The process gets no chance to clean up: what is on disk is what a crash in the middle of a tool call leaves.
    """
    from companion.support.workspace import check_session_id, inside_root

    storage = inside_root(storage_dir)
    check_session_id(session_id)
    started = storage.parent / f"tool-started-{session_id}"
    started.unlink(missing_ok=True)
    storage.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "companion.sessions.restart_runner", "--backend", backend, "--storage-dir", str(storage),
            "--session-id", session_id, "--tool-started", str(started), "--", prompt]
    env = dict(os.environ, PYTHONPATH=_package_parent(), PYTHONIOENCODING="utf-8")
    process = subprocess.Popen(args, cwd=storage.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + timeout
    while not started.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.kill()  # SIGKILL on Linux and macOS
    stdout, stderr = process.communicate()
    if not started.exists():
        raise PhaseFailed(f"The tool never started (exit status {process.returncode}).\n{stderr}")
    return PhaseResult(process.pid, process.returncode, stdout, stderr)


def _package_parent() -> str:
    here = str(REPO_ROOT)
    existing = os.environ.get("PYTHONPATH")
    return here if not existing else here + os.pathsep + existing


def main(argv: list[str] | None = None) -> None:
    """Command line of one phase process."""
    parser = argparse.ArgumentParser(description="One phase of the restart test.")
    parser.add_argument("--backend", default="offline")
    parser.add_argument("--session-id", default=None, help="omit to run an agent with no session manager")
    parser.add_argument("--storage-dir", required=True)
    parser.add_argument("--window-size", type=int, default=None, help="a sliding window of this many messages")
    parser.add_argument("--tool-started", default=None, help="run tool_phase: its tool touches this file, then hangs")
    parser.add_argument("prompt", nargs="?", default=None, help="omit to restore the session without a call")
    args = parser.parse_args(argv)
    if args.tool_started:
        tool_phase(args.prompt, args.backend, args.session_id, args.storage_dir, args.tool_started)
        return
    phase(args.prompt, args.backend, args.session_id, args.storage_dir, args.window_size)


if __name__ == "__main__":
    main()
