"""Crypto-shredding (notebook 09's last section): each user's memory file is ciphertext under that user's key, and
destroying the key forgets the user, wherever copies of the ciphertext are."""

from __future__ import annotations

import shutil

import pytest
from cryptography.fernet import Fernet

from companion.measure.byte_scan import scan
from companion.memory.shredding import EncryptedMemory, KeyRing, LinkError, ShreddedError, can_decrypt

ADA = ["The user's home address is 12 Harbour Lane.", "The user's favorite pub is the Harbour Inn."]
GRACE = ["The user's home address is 7 Quay Street."]


@pytest.fixture
def memory(tmp_path) -> EncryptedMemory:
    store = EncryptedMemory(tmp_path / "data", KeyRing(tmp_path / "keys"))
    for line in ADA:
        store.add("ada", line)
    for line in GRACE:
        store.add("grace", line)
    return store


def test_each_user_reads_their_own_memories_and_the_files_hold_only_ciphertext(memory, tmp_path):
    assert memory.read("ada") == ADA and memory.read("grace") == GRACE
    assert scan(tmp_path / "data", "12 Harbour Lane").places == []
    assert scan(tmp_path / "data", "Harbour").places == [], "not a word of it in the data folder"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["ada.enc", "grace.enc"], "no temporary file left"
    assert oct((tmp_path / "keys" / "ada.key").stat().st_mode & 0o777) == "0o600"


def test_destroying_the_key_forgets_the_user_and_every_copy_of_their_file(memory, tmp_path):
    backup = tmp_path / "backup.enc"
    shutil.copyfile(memory.path("ada"), backup)  # a copy forget() cannot reach: a backup, a deleted file's blocks
    shredded = memory.forget_user("ada")
    assert shredded.overwritten == 44 and not shredded.key_file.exists()  # a Fernet key is 44 base64 characters
    with pytest.raises(ShreddedError, match="destroyed"):
        memory.read("ada")
    with pytest.raises(ShreddedError):
        memory.keys.key("ada")  # a read never makes a new key for a shredded user
    for key in [Fernet.generate_key(), memory.keys.key("grace")]:
        assert not can_decrypt(key, backup.read_bytes())
    assert memory.read("grace") == GRACE, "the other user is untouched"
    assert memory.keys.users() == ["grace"]
    assert scan(tmp_path, "12 Harbour Lane").places == [], "ciphertext only, and no key to read it"


def test_destroying_twice_and_bad_user_ids(memory):
    memory.forget_user("ada")
    with pytest.raises(ShreddedError, match="already shredded"):
        memory.forget_user("ada")
    for bad in ["../ada", "", "a b", "x" * 65]:
        with pytest.raises(ValueError, match="user id"):
            memory.add(bad, "anything")
    with pytest.raises(ValueError, match="one non-empty line"):
        memory.add("grace", "two\nlines")


def test_another_users_file_does_not_decrypt_with_this_users_key(memory):
    memory.path("grace").write_bytes(memory.path("ada").read_bytes())
    with pytest.raises(ShreddedError, match="does not decrypt"):
        memory.read("grace")


# Issue 31, items 7 and 8: links are refused, concurrent adds lose nothing, an add after a shred is refused.


def test_destroy_refuses_a_key_file_that_is_a_link_and_leaves_its_target_alone(tmp_path):
    """Before the fix destroy() opened the key with open(path, "r+b"), which follows a link: it zero-filled the target."""
    keys = KeyRing(tmp_path / "keys")
    outside = tmp_path / "precious.txt"
    outside.write_text("someone else's file")
    (tmp_path / "keys" / "ada.key").symlink_to(outside)
    with pytest.raises(LinkError, match="symbolic link"):
        keys.destroy("ada")
    with pytest.raises(LinkError, match="symbolic link"):
        keys.key("ada")
    assert outside.read_text() == "someone else's file" and (tmp_path / "keys" / "ada.key").is_symlink()


def test_encrypted_files_that_are_links_are_refused(memory, tmp_path):
    outside = tmp_path / "elsewhere.enc"
    outside.write_bytes(memory.path("ada").read_bytes())
    memory.path("ada").unlink()
    memory.path("ada").symlink_to(outside)
    with pytest.raises(LinkError, match="symbolic link"):
        memory.read("ada")
    with pytest.raises(LinkError, match="symbolic link"):
        memory.add("ada", "The user's team is payments.")
    assert outside.read_bytes() != b"" and memory.path("ada").is_symlink(), "nothing written through the link"
    link_key = tmp_path / "grace-key-target"
    link_key.write_bytes(memory.keys.path("grace").read_bytes())
    memory.keys.path("grace").unlink()
    memory.keys.path("grace").symlink_to(link_key)
    with pytest.raises(LinkError):
        memory.add("grace", "The user's team is search.")


ADDS = """
import sys, time
from pathlib import Path
from companion.memory.shredding import EncryptedMemory, KeyRing
memory = EncryptedMemory(sys.argv[1] + "/data", KeyRing(sys.argv[1] + "/keys"))
Path(sys.argv[1], "ready-" + sys.argv[2]).touch()
while len(list(Path(sys.argv[1]).glob("ready-*"))) < 2:  # both processes imported: start together
    time.sleep(0.001)
for i in range(int(sys.argv[3])):
    memory.add("ada", f"memory {sys.argv[2]}-{i}")
"""


def test_two_processes_adding_at_once_lose_nothing(tmp_path):
    """Before the fix add() read, re-encrypted and renamed a fixed `.tmp` name with no lock: 2 x 40 adds lost some
    (7 in the issue's probe) or failed on the shared temporary file."""
    import subprocess
    import sys

    count = 40
    runs = [subprocess.Popen([sys.executable, "-c", ADDS, str(tmp_path), name, str(count)], stderr=subprocess.PIPE,
                             text=True) for name in ("a", "b")]
    errors = [run.communicate(timeout=120)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], errors
    stored = EncryptedMemory(tmp_path / "data", KeyRing(tmp_path / "keys")).read("ada")
    assert sorted(stored) == sorted(f"memory {n}-{i}" for n in "ab" for i in range(count)), f"{len(stored)} of 80"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["ada.enc"], "no temporary file left"


def test_an_add_after_a_shred_is_refused_and_makes_no_key(memory):
    """Before the fix add() made a new key for the shredded user, then failed to decrypt their old file with it
    ("another user's file, or damaged"), leaving the new key behind."""
    memory.forget_user("ada")
    with pytest.raises(ShreddedError, match="this user was shredded"):
        memory.add("ada", "The user's team is payments.")
    assert not memory.keys.path("ada").exists() and memory.keys.users() == ["grace"]
    memory.path("ada").unlink()  # even with the old ciphertext gone, the shred is remembered
    with pytest.raises(ShreddedError, match="this user was shredded"):
        memory.add("ada", "The user's team is payments.")
    memory.add("grace", "The user's team is search.")
    assert memory.read("grace") == [*GRACE, "The user's team is search."]
