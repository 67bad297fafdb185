"""Two writers on one session: with the barrier a turn is lost on every run; with the turn lock none is."""

from __future__ import annotations

import threading

import pytest
from strands import Agent
from strands.session import FileSessionManager

from companion.models.offline_model import OfflineModel
from companion.sessions.session_files import message_files
from companion.sessions.two_writers import barrier, lock_path, run_writers, turn_lock, user_texts_on_disk
from companion.support.workspace import UnsafePathError

PROMPTS = {"writer-a": "My favorite color is teal.", "writer-b": "My favorite city is Lisbon."}


def seeded(storage, session_id):
    agent = Agent(model=OfflineModel(), session_manager=FileSessionManager(session_id=session_id, storage_dir=str(storage)),
                  callback_handler=None)
    agent("My name is Pin.")
    return storage


@pytest.mark.parametrize("lock, files, prompts_found, restored", [(False, 4, 1, [2, 2]), (True, 6, 2, [2, 4])])
def test_two_writers_lose_a_turn_without_the_lock_and_none_with_it(workspace_root, lock, files, prompts_found, restored):
    storage = seeded(workspace_root / "two" / "sessions", "shared")
    results = run_writers(PROMPTS, backend="offline", session_id="shared", storage_dir=storage, lock=lock)
    assert sorted(int(r.stdout.splitlines()[0].split(": ")[1]) for r in results.values()) == restored
    paths = message_files(storage, "shared")
    assert len(paths) == files
    texts = user_texts_on_disk(paths)
    assert sum(prompt in texts for prompt in PROMPTS.values()) == prompts_found
    assert [p.name for p in (workspace_root / "two" / "barrier").iterdir()]  # the barrier files are in the workspace


def test_unsafe_ids_are_refused_before_any_process(workspace_root):
    with pytest.raises(UnsafePathError):
        run_writers(PROMPTS, backend="offline", session_id="../x", storage_dir=workspace_root / "s", lock=False)
    with pytest.raises(UnsafePathError):
        run_writers({"a/b": "hi", "c": "ho"}, backend="offline", session_id="ok", storage_dir=workspace_root / "s", lock=False)
    assert not (workspace_root / "s").exists()


def test_barrier_times_out_with_a_message(tmp_path):
    with pytest.raises(TimeoutError, match="waited"):
        barrier(tmp_path, "started", "alone", peers=2, timeout=0.05)


def test_turn_lock_is_released_after_each_block_and_is_not_reentrant(tmp_path):
    """The lock is next to the session, is free again after a block, and is NOT reentrant: a second `turn_lock` on
    the same path while the first is held (nested in the same process, or from another thread) waits for the first to
    be released. Nesting it in one thread would therefore wait forever: hold it once around restore + turn.

    (turn_lock's source is printed in notebook 01 as the lesson, so it stays this plain flock; the nested attempt is
    made from a second thread here so the test can observe the wait instead of hanging.)"""
    path = lock_path(tmp_path, "demo")
    assert path.name == "session_demo.lock" and path.parent == tmp_path
    with turn_lock(path):
        assert path.exists()
    with turn_lock(path):  # released after the first block: the second one gets it at once
        pass

    entered = threading.Event()

    def nested() -> None:
        with turn_lock(path):
            entered.set()

    with turn_lock(path):
        inner = threading.Thread(target=nested, daemon=True)
        inner.start()
        assert not entered.wait(1.0), "a second turn_lock on the same path was granted while the first was held"
    assert entered.wait(10), "the waiting turn_lock got the lock once the first block ended"
    inner.join(10)
