"""Crypto-shredding: each user's memory file is encrypted with that user's own key; forgetting the user destroys the key.

Why: deleting a file removes its name, not every copy of its bytes. A file that was replaced or deleted leaves its
blocks on the disk until they are reused, a backup keeps last night's copy, a SQLite journal or an editor's temporary
file held it for a moment. A byte scan of the files that exist cannot see any of those. If every copy is ciphertext
under a key that only this user's data uses, destroying that one small key makes all of them unreadable at once,
wherever they are; that is the whole idea (it is how cloud stores "delete" data they cannot reach, such as backups).

What it does not do: it does not make a fact disappear from a user's data while the user stays (forget() does that, by
lineage); it forgets a whole user. And the key itself is a file here, so its own old blocks are the same problem one
level down: the module overwrites the key file before unlinking it, which is a best effort on a journaling file system
or an SSD, not a guarantee. In production the keys live apart from the data, in a key management service that
destroys a key for good (AWS KMS's ScheduleKeyDeletion, say), and only wrapped data keys sit next to the data.

`cryptography`'s Fernet (AES-128-CBC with an HMAC-SHA256 over the whole token) is the cipher: authenticated, so a
ciphertext read with a wrong or made-up key fails loudly instead of decrypting to noise.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

_USER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def can_decrypt(key: bytes, token: bytes) -> bool:
    """Whether `key` decrypts `token` (Fernet checks its HMAC first: a wrong key is told apart, never read as noise)."""
    try:
        Fernet(key).decrypt(token)
    except (InvalidToken, ValueError):
        return False
    return True


class ShreddedError(LookupError):
    """The user's key was destroyed: their data can no longer be read (that is the point)."""


def _check_user(user: str) -> str:
    """A user id becomes a file name: letters, digits, '-' and '_' only, so it cannot point outside the folder."""
    if not isinstance(user, str) or not _USER_ID.match(user):
        raise ValueError(f"A user id must be 1-64 letters, digits, '-' or '_' (it names a key file); got {user!r}.")
    return user


@dataclass(frozen=True)
class Shredded:
    """What shred() destroyed: the key file and how many bytes of it were overwritten before it was unlinked."""

    user: str
    key_file: Path
    overwritten: int


class KeyRing:
    """One Fernet key per user, one file each (`<folder>/<user>.key`, readable by its owner only).

    Keep the folder apart from the data it protects (another disk, another service): a key stored beside its
    ciphertext in every backup protects nothing.
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, user: str) -> Path:
        return self.folder / f"{_check_user(user)}.key"

    def key(self, user: str, *, create: bool = False) -> bytes:
        """The user's key; with create=True a new one is made for a user who has none. A destroyed key is never
        re-created by a read: ShreddedError says the user was shredded."""
        path = self.path(user)
        if path.exists():
            return path.read_bytes()
        if not create:
            raise ShreddedError(f"No key for user {user!r} in {self.folder}: it was destroyed (or never made), so "
                                "their encrypted memory cannot be read by anyone.")
        key = Fernet.generate_key()
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(key)
            file.flush()
            os.fsync(file.fileno())
        return key

    def users(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.key"))

    def destroy(self, user: str) -> Shredded:
        """Destroy the user's key: overwrite the file with zeros (flushed to the disk), then unlink it.

        Idempotent in effect: destroying a key that is already gone raises ShreddedError, and changes nothing."""
        path = self.path(user)
        if not path.exists():
            raise ShreddedError(f"User {user!r} has no key in {self.folder}: nothing to destroy (already shredded?).")
        size = path.stat().st_size
        with open(path, "r+b") as file:
            file.write(b"\0" * size)
            file.flush()
            os.fsync(file.fileno())
        path.unlink()
        return Shredded(user, path, size)


class EncryptedMemory:
    """Each user's memory as one file of Fernet ciphertext (`<folder>/<user>.enc`), one line per memory.

    The whole file is re-encrypted on every write (a new random IV each time), so no plaintext ever touches the disk:
    the temporary file of the atomic rename holds ciphertext too.
    """

    def __init__(self, folder: str | os.PathLike, keys: KeyRing) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.keys = keys

    def path(self, user: str) -> Path:
        return self.folder / f"{_check_user(user)}.enc"

    def read(self, user: str) -> list[str]:
        """The user's memories, decrypted. ShreddedError once the key is destroyed (the ciphertext may remain)."""
        path = self.path(user)
        if not path.exists():
            return []
        key = self.keys.key(user)
        try:
            text = Fernet(key).decrypt(path.read_bytes()).decode("utf-8")
        except InvalidToken:
            raise ShreddedError(f"{path} does not decrypt with user {user!r}'s key (another user's file, or damaged)."
                                ) from None
        return [line for line in text.split("\n") if line]

    def add(self, user: str, memory: str) -> None:
        """Append one memory (a line) to the user's encrypted file; the user's key is made on the first write."""
        if "\n" in memory or not memory.strip():
            raise ValueError("A memory is one non-empty line.")
        key = self.keys.key(user, create=True)
        lines = [*self.read(user), memory.strip()]
        token = Fernet(key).encrypt("\n".join(lines).encode("utf-8"))
        path = self.path(user)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_bytes(token)
        os.replace(temporary, path)

    def forget_user(self, user: str) -> Shredded:
        """Forget everything of one user by destroying their key; the ciphertext is left where it is, unreadable."""
        return self.keys.destroy(user)
