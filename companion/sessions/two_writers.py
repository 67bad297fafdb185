"""Two writers, one session: two OS processes restore the same session and each add a turn.

`FileSessionManager` numbers a new message from the last message it restored and does no locking, so two processes
that restore the same session before either writes both write `message_N.json`, `message_N+1.json`: the later write
replaces the earlier one and a whole turn is gone. A file barrier makes the race happen on every run (both writers
have restored before either sends its prompt), and :func:`turn_lock` is the remedy a user can apply.

Each writer prints what it restored and the ids of the message files it wrote; :func:`race_writers` runs the writers
on one session per way of writing (without and with the lock) and returns one row per writer for notebook 01, and
per session the messages lost.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from companion.sessions.restart_runner import PhaseFailed, PhaseResult

try:  # POSIX (Linux, macOS)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt

BARRIER_TIMEOUT = 120.0


def lock_path(storage_dir: str | os.PathLike, session_id: str) -> Path:
    """The lock file of a session: next to its directory, because the SDK refuses to create a session whose
    directory already exists ("Session ... already exists"), so the lock cannot be made inside it first."""
    return Path(storage_dir) / f"session_{session_id}.lock"


@contextmanager
def turn_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the duration of the block: restore + turn."""
    if fcntl is None:  # pragma: no cover - Windows has no fcntl
        with _windows_lock(path):
            yield
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # waits while another process holds the lock
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def _windows_lock(path: str | os.PathLike) -> Iterator[None]:  # pragma: no cover - Windows only, untested here
    with open(path, "a+b") as handle:
        while True:
            try:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)  # retries for 10 s, then raises OSError
                break
            except OSError:
                continue
        try:
            yield
        finally:
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)


def barrier(directory: str | os.PathLike, step: str, name: str, peers: int, timeout: float = BARRIER_TIMEOUT) -> None:
    """Say "`name` reached `step`" with a file, then wait until `peers` writers have said so."""
    folder = Path(directory)
    (folder / f"{step}-{name}.ready").touch()
    deadline = time.monotonic() + timeout
    while len(list(folder.glob(f"{step}-*.ready"))) < peers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"barrier {step!r}: {name} waited {timeout:.0f} s for {peers} writers")
        time.sleep(0.01)


def writer(
    name: str, prompt: str, backend: str, session_id: str, storage_dir: str, barrier_dir: str, peers: int, lock: bool
) -> None:
    """One writer process: restore the shared session, add one turn, print, exit.

    It prints the messages it restored, its reply, the messages it then held, and the ids of the message files its
    session manager created (noted as the SDK's file repository writes each one)."""
    from strands import Agent
    from strands.session import FileSessionManager

    from companion.models.backends import make_model

    written: list[int] = []

    class NotingFiles(FileSessionManager):
        def create_message(self, session_id: str, agent_id: str, session_message: Any, **kwargs: Any) -> None:
            super().create_message(session_id, agent_id, session_message, **kwargs)
            written.append(session_message.message_id)

    barrier(barrier_dir, "started", name, peers)  # both processes are up before either touches the session
    guard = turn_lock(lock_path(storage_dir, session_id)) if lock else nullcontext()
    with guard:
        agent = Agent(
            model=make_model(backend),
            session_manager=NotingFiles(session_id=session_id, storage_dir=storage_dir),
            callback_handler=None,
        )
        print(f"messages restored: {len(agent.messages)}")
        if not lock:
            barrier(barrier_dir, "restored", name, peers)  # the race: both have restored, neither has written
        result = agent(prompt)
    print(f"reply: {str(result).strip()}")
    print(f"messages now: {len(agent.messages)}")
    print(f"message ids written: {written}")


def run_writers(
    prompts: dict[str, str],
    *,
    backend: str,
    session_id: str,
    storage_dir: str | os.PathLike,
    lock: bool,
    timeout: float = 300,
) -> dict[str, PhaseResult]:
    """Start one :func:`writer` process per prompt at the same time, wait for all, return what each printed.

    The barrier directory is `<storage_dir's parent>/barrier`, emptied before the writers start.
    """
    from companion.sessions.restart_runner import _package_parent
    from companion.support.workspace import check_session_id, inside_root, reset_workspace

    check_session_id(session_id)
    for name in prompts:
        check_session_id(name)
    if len(prompts) < 2:
        raise ValueError("run_writers needs at least two writers")
    storage = inside_root(storage_dir)
    storage.mkdir(parents=True, exist_ok=True)
    barrier_dir = reset_workspace(storage.parent / "barrier")
    env = dict(os.environ, PYTHONPATH=_package_parent(), PYTHONIOENCODING="utf-8")
    processes = {}
    for name, prompt in prompts.items():
        args = [sys.executable, "-m", "companion.sessions.two_writers", "--name", name, "--backend", backend,
                "--session-id", session_id, "--storage-dir", str(storage), "--barrier-dir", str(barrier_dir),
                "--peers", str(len(prompts))] + (["--lock"] if lock else []) + ["--", prompt]
        processes[name] = subprocess.Popen(
            args, cwd=storage.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    results, failures = {}, []
    for name, process in processes.items():
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            failures.append(f"writer {name} did not finish within {timeout} s.\n{stderr}")
            continue
        if process.returncode != 0:
            failures.append(f"writer {name} exited with status {process.returncode}:\n{stderr}")
        results[name] = PhaseResult(process.pid, process.returncode, stdout, stderr)
    if failures:
        raise PhaseFailed("\n\n".join(failures))
    return results


@dataclass(frozen=True)
class WriterRace:
    """What :func:`race_writers` ran: per session id, what each writer process printed (`runs`); one row per writer
    (`rows`); and per session, the message files on disk afterwards and the messages lost (`totals`)."""

    runs: dict[str, dict[str, PhaseResult]]
    rows: list[dict[str, Any]]
    totals: list[dict[str, Any]]

    def summary(self) -> str:
        """One line per session: its message files on disk and the messages lost."""
        return "\n".join(f"{t['session']}: {t['message files']} message files, {t['messages lost']} messages lost"
                         for t in self.totals)


def writer_report(stdout: str) -> tuple[int, list[int]] | None:
    """(messages restored, ids of the message files written) as a writer process printed them, or None."""
    restored = re.search(r"^messages restored: (\d+)$", stdout, re.MULTILINE)
    written = re.search(r"^message ids written: \[([\d, ]*)\]$", stdout, re.MULTILINE)
    if not restored or not written:
        return None
    return int(restored.group(1)), [int(i) for i in written.group(1).split(",") if i.strip()]


def race_writers(
    prompts: dict[str, str],
    locks: dict[str, bool],
    *,
    backend: str,
    storage_dir: str | os.PathLike,
    timeout: float = 300,
) -> WriterRace:
    """For each session id in `locks`, one after the other: :func:`run_writers` on that session (holding the turn lock
    when its value is True). Each session should already hold the turn the writers restore.

    A row per writer: its session, the messages it restored, the message files it wrote, whether its prompt is in the
    session's files afterwards, and its exit code (within a session, the rows sorted by those values, not by writer,
    so the table does not depend on which process won the race or got the lock first). A total per session: the message files on disk
    afterwards, and the messages lost: the files there before, plus every message a writer wrote, minus the files on
    disk.
    """
    from companion.sessions.session_files import message_files

    runs: dict[str, dict[str, PhaseResult]] = {}
    rows, totals = [], []
    for session_id, lock in locks.items():
        before = len(message_files(storage_dir, session_id))
        runs[session_id] = run_writers(prompts, backend=backend, session_id=session_id, storage_dir=storage_dir,
                                       lock=lock, timeout=timeout)
        reports = [(writer_report(run.stdout), run.returncode, name) for name, run in runs[session_id].items()]
        if any(report is None for report, _, _ in reports):
            raise PhaseFailed(f"a writer on {session_id!r} did not report what it restored and wrote")
        said = user_texts_on_disk(message_files(storage_dir, session_id))
        found = sorted((restored, written, prompts[name] in said, code) for (restored, written), code, name in reports)
        for restored, written, kept, code in found:  # sorted by what each saw and left: the same on every run
            rows.append({"session": session_id, "restored": restored,
                         "wrote files": ", ".join(f"message_{i}.json" for i in written),
                         "its prompt on disk": kept, "exit code": code})
        on_disk = len(message_files(storage_dir, session_id))
        totals.append({"session": session_id, "message files": on_disk,
                       "messages lost": before + sum(len(written) for (_, written), _, _ in reports) - on_disk})
    return WriterRace(runs, rows, totals)


def user_texts_on_disk(message_paths: list[Path]) -> list[str]:
    """The text of every user message among these message files, read from the files themselves."""
    texts = []
    for path in message_paths:
        message = json.loads(Path(path).read_text(encoding="utf-8"))["message"]
        if message["role"] == "user":
            texts.append(" ".join(block["text"] for block in message["content"] if "text" in block))
    return texts


def main(argv: list[str] | None = None) -> None:
    """Command line of one writer process."""
    parser = argparse.ArgumentParser(description="One writer of a shared session.")
    parser.add_argument("--name", required=True)
    parser.add_argument("--backend", default="offline")
    parser.add_argument("--session-id", required=True)
    parser.add_argument("--storage-dir", required=True)
    parser.add_argument("--barrier-dir", required=True)
    parser.add_argument("--peers", type=int, default=2)
    parser.add_argument("--lock", action="store_true", help="hold the session's turn lock around restore + turn")
    parser.add_argument("prompt")
    args = parser.parse_args(argv)
    writer(args.name, args.prompt, args.backend, args.session_id, args.storage_dir, args.barrier_dir, args.peers, args.lock)


if __name__ == "__main__":
    main()
