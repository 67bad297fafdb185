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

Files are opened without following symbolic links (O_NOFOLLOW) and a link is refused (`LinkError`): a key file
linked to another file would otherwise have that file zero-filled by the shred. Adds serialise on a per-user lock
(fcntl, in the key folder, beside the key) and write their temporary copy under a unique name, so two processes
adding at once lose nothing. A shred leaves a `<user>.shredded` mark in the key folder, so a later add is refused
("this user was shredded") instead of making a new key.

`cryptography`'s Fernet (AES-128-CBC with an HMAC-SHA256 over the whole token) is the cipher: authenticated, so a
ciphertext read with a wrong or made-up key fails loudly instead of decrypting to noise.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

try:  # POSIX (Linux, macOS), as the other locks of the workbook (companion/sessions/two_writers.py)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

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


class LinkError(OSError):
    """A key or memory file is a symbolic link (or not a plain file): refused, never read or written through."""


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _open(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open without following a link at the last component; a link (or a folder, a device) is a LinkError."""
    try:
        descriptor = os.open(path, flags | _NOFOLLOW, mode)
    except OSError as error:
        if error.errno == errno.ELOOP or (error.errno == errno.EEXIST and path.is_symlink()):
            raise LinkError(errno.ELOOP, f"{path} is a symbolic link: refused (a key or memory file is never read or "
                                         "written through a link)", str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise LinkError(errno.EINVAL, f"{path} is not a plain file: refused", str(path))
    return descriptor


def _read_bytes(path: Path) -> bytes:
    with os.fdopen(_open(path, os.O_RDONLY), "rb") as file:
        return file.read()


def _exists(path: Path) -> bool:
    """Whether anything is at `path`, a link included (Path.exists follows a link and says False for a broken one)."""
    return os.path.lexists(path)


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

    def mark(self, user: str) -> Path:
        """The file a shred leaves: it says the user was shredded, so no later add makes them a new key."""
        return self.folder / f"{_check_user(user)}.shredded"

    def was_shredded(self, user: str) -> bool:
        return _exists(self.mark(user))

    @contextmanager
    def lock(self, user: str) -> Iterator[None]:
        """Hold the user's exclusive lock (`<folder>/<user>.lock`, fcntl) for the block: one writer of a user at a
        time, across processes."""
        descriptor = _open(self.folder / f"{_check_user(user)}.lock", os.O_RDWR | os.O_CREAT)
        try:
            if fcntl is not None:
                fcntl.flock(descriptor, fcntl.LOCK_EX)  # waits while another process adds for this user
            yield
        finally:
            os.close(descriptor)  # closing releases the lock

    def key(self, user: str, *, create: bool = False) -> bytes:
        """The user's key; with create=True a new one is made for a user who has none. A destroyed key is never
        re-created: a read raises ShreddedError (the user was shredded), and so does create=True once the user was
        shredded. A key file that is a link is refused (LinkError)."""
        path = self.path(user)
        if _exists(path):
            return _read_bytes(path)
        if not create:
            raise ShreddedError(f"No key for user {user!r} in {self.folder}: it was destroyed (or never made), so "
                                "their encrypted memory cannot be read by anyone.")
        if self.was_shredded(user):
            raise ShreddedError(f"No new key for user {user!r}: this user was shredded (their key was destroyed; "
                                f"{self.mark(user).name} in {self.folder} records it).")
        key = Fernet.generate_key()
        descriptor = _open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(descriptor, "wb") as file:
            file.write(key)
            file.flush()
            os.fsync(file.fileno())
        return key

    def users(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.key"))

    def destroy(self, user: str) -> Shredded:
        """Destroy the user's key: overwrite the file with zeros (flushed to the disk), then unlink it, and leave the
        `mark` that says the user was shredded.

        Idempotent in effect: destroying a key that is already gone raises ShreddedError, and changes nothing. A key
        file that is a link is refused (LinkError) and its target is not touched."""
        path = self.path(user)
        if not _exists(path):
            raise ShreddedError(f"User {user!r} has no key in {self.folder}: nothing to destroy (already shredded?).")
        with self.lock(user), os.fdopen(_open(path, os.O_RDWR), "r+b") as file:
            size = os.fstat(file.fileno()).st_size
            file.write(b"\0" * size)
            file.flush()
            os.fsync(file.fileno())
            os.close(_open(self.mark(user), os.O_WRONLY | os.O_CREAT))
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
        if not _exists(path):
            return []
        data = _read_bytes(path)  # a link is refused before the key is read
        key = self.keys.key(user)
        try:
            text = Fernet(key).decrypt(data).decode("utf-8")
        except InvalidToken:
            raise ShreddedError(f"{path} does not decrypt with user {user!r}'s key (another user's file, or damaged)."
                                ) from None
        return [line for line in text.split("\n") if line]

    def add(self, user: str, memory: str) -> None:
        """Append one memory (a line) to the user's encrypted file; the user's key is made on the first write.

        The read, re-encryption and rename happen under the user's lock (`KeyRing.lock`), through a temporary file of
        a unique name, so concurrent adds, in threads or processes, all land. A shredded user is refused
        (ShreddedError: "this user was shredded"), before any key is made."""
        if "\n" in memory or not memory.strip():
            raise ValueError("A memory is one non-empty line.")
        path = self.path(user)
        with self.keys.lock(user):
            if self.keys.was_shredded(user) or (_exists(path) and not _exists(self.keys.path(user))):
                raise ShreddedError(f"Cannot add to user {user!r}'s memory: this user was shredded (their key was "
                                    "destroyed); nothing was written.")
            key = self.keys.key(user, create=True)
            lines = [*self.read(user), memory.strip()]
            token = Fernet(key).encrypt("\n".join(lines).encode("utf-8"))
            handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(handle, "wb") as file:
                    file.write(token)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temporary, path)  # replaces a name: a link at `path` was refused by read() above
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise

    def forget_user(self, user: str) -> Shredded:
        """Forget everything of one user by destroying their key; the ciphertext is left where it is, unreadable."""
        return self.keys.destroy(user)
