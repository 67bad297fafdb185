"""A memory store whose file is locked by another writer, or damaged mid-file: the store's own errors, naming the file."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest

from companion.memory.vector_store import DEFAULT_BUSY_TIMEOUT, SqliteVecMemoryStore, StoreError, connect

HOLD = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(120)
"""


class FakeEmbedder:
    """Deterministic 8-dimensional vectors: the locking and damage paths do not need a real model."""

    model_id = "fake-8"
    dimensions = 8

    def embed(self, texts):
        import numpy as np

        rows = []
        for text in texts:
            seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
            row = np.random.default_rng(seed).normal(size=8).astype(np.float32)
            rows.append(row / np.linalg.norm(row))
        return np.array(rows, dtype=np.float32).reshape(len(rows), 8)


needs_proc_locks = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="naming the lock holder needs Linux /proc/locks")


@pytest.fixture
def holder(tmp_path):
    """Another process holding a write (exclusive) lock on a healthy store file."""
    path = tmp_path / "memory.db"
    with SqliteVecMemoryStore(path, FakeEmbedder()) as store:
        store.put("The user prefers Tuesday deployments.")
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    yield path, process
    process.kill()
    process.wait()


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_busy_timeout_is_documented():
    assert DEFAULT_BUSY_TIMEOUT == 5.0
    assert "busy_timeout" in SqliteVecMemoryStore.__init__.__doc__ and "5 s" in SqliteVecMemoryStore.__init__.__doc__


@needs_proc_locks
def test_opening_a_locked_store_says_locked_and_by_whom(holder):
    path, process = holder
    before = digest(path)
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        SqliteVecMemoryStore(path, FakeEmbedder(), busy_timeout=0.5)
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert "is locked" in message and "waited 0.5 s" in message, message
    assert f"process {process.pid}" in message, message
    assert "not a SQLite database" not in message and "move" not in message and "aside" not in message, message
    assert digest(path) == before


@needs_proc_locks
def test_an_open_store_reports_a_lock_taken_later(tmp_path):
    path = tmp_path / "memory.db"
    store = SqliteVecMemoryStore(path, FakeEmbedder(), busy_timeout=0.5)
    store.put("The user prefers Tuesday deployments.")
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "locked"
        for action in (lambda: store.count(), lambda: store.put("The user lives in Lima."), lambda: store.search_keywords("Lima")):
            with pytest.raises(StoreError, match=r"is locked .*process \d+"):
                action()
    finally:
        process.kill()
        process.wait()
    assert store.count() == 1, "usable again once the other writer is gone"
    store.close()


@needs_proc_locks
def test_a_lock_held_in_this_same_process_is_named_as_such(tmp_path):
    path = tmp_path / "memory.db"
    with SqliteVecMemoryStore(path, FakeEmbedder()):
        pass
    other, _ = connect(path)  # the same SQLite library as the store's: POSIX locks of one process do not conflict
    other.isolation_level = None
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="is locked.*this same process"):
            SqliteVecMemoryStore(path, FakeEmbedder(), busy_timeout=0.2)
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_damaged_page_becomes_a_store_error_naming_the_file(tmp_path):
    path = tmp_path / "memory.db"
    with SqliteVecMemoryStore(path, FakeEmbedder()) as store:
        store.put_many([f"Memory number {i} is about topic {i * 7} and some padding text." * 3 for i in range(300)])
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 20 * page
    middle = (len(data) // page // 2) * page
    data[middle : middle + 8 * page] = os.urandom(8 * page)
    path.write_bytes(bytes(data))
    problems = []
    for action in ("open", "count", "search_vectors", "search_keywords", "all"):
        try:
            with SqliteVecMemoryStore(path, FakeEmbedder()) as store:
                if action != "open":
                    getattr(store, action)(*(["topic"] if action.startswith("search") else []))
        except StoreError as error:
            problems.append(str(error))
    assert problems, "the damage is noticed"
    for message in problems:
        assert str(path) in message and "damaged" in message, message


@needs_proc_locks
def test_opening_a_store_keeps_another_connections_lock(tmp_path):
    """Opening must not close a descriptor of the file: that would drop this process's POSIX locks on it."""
    path = tmp_path / "memory.db"
    with SqliteVecMemoryStore(path, FakeEmbedder()):
        pass
    other, _ = connect(path)
    other.isolation_level = None
    other.execute("BEGIN EXCLUSIVE")
    try:
        for _ in range(2):
            with pytest.raises(StoreError, match="is locked"):
                SqliteVecMemoryStore(path, FakeEmbedder(), busy_timeout=0.1)
        with open("/proc/locks") as locks:
            assert str(os.stat(path).st_ino) in locks.read(), "the other connection still holds its lock"
    finally:
        other.execute("ROLLBACK")
        other.close()
