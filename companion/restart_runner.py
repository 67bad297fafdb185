"""The restart test: one session, two real OS processes that share nothing but a session directory.

`run_phase("plant", ...)` and `run_phase("recall", ...)` each start a fresh Python interpreter that runs
:func:`phase` below and exits. Notebook 01 prints :func:`phase`'s source, because those few Strands lines
are the lesson.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass

from .paths import REPO_ROOT

DEFAULT_PLANT = "My name is Pin and my favorite number is 42. Just acknowledge, one short sentence."
DEFAULT_RECALL = "What is my name and my favorite number?"


def phase(
    prompt: str | None, backend: str, session_id: str | None, storage_dir: str, window_size: int | None = None
) -> None:
    """One process's whole life: build an agent on the session (if any), send one prompt (if any), print, exit."""
    from strands import Agent
    from strands.agent.conversation_manager import SlidingWindowConversationManager
    from strands.session import FileSessionManager

    from companion.backends import make_model

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
    from .workspace import check_session_id, inside_root

    # Every argument is checked before anything is created or started.
    storage = inside_root(storage_dir)
    args = [sys.executable, "-m", "companion.restart_runner", "--backend", backend, "--storage-dir", str(storage)]
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
    parser.add_argument("prompt", nargs="?", default=None, help="omit to restore the session without a call")
    args = parser.parse_args(argv)
    phase(args.prompt, args.backend, args.session_id, args.storage_dir, args.window_size)


if __name__ == "__main__":
    main()
