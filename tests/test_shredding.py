"""Crypto-shredding (notebook 09's last section): each user's memory file is ciphertext under that user's key, and
destroying the key forgets the user, wherever copies of the ciphertext are."""

from __future__ import annotations

import shutil

import pytest
from cryptography.fernet import Fernet

from companion.measure.byte_scan import scan
from companion.memory.shredding import EncryptedMemory, KeyRing, ShreddedError, can_decrypt

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
