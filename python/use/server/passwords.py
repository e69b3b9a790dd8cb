"""The password file of `use serve --auth password`: who may connect, as salted password hashes.

Format (one user a line, `#` starts a comment line; the file is written by `use passwd`):

    NAME:pbkdf2-sha256:ITERATIONS:SALT:HASH

SALT is 16 random bytes and HASH the 32-byte PBKDF2-HMAC-SHA256 of the UTF-8 password, both in
standard base64. PBKDF2-HMAC-SHA256 because both sides that read the file have it built in: Python's
`hashlib.pbkdf2_hmac` (here: `use passwd` writes it, the tests check it) and the JDK's
`PBKDF2WithHmacSHA256`, with which the Thrift server's authentication provider
(`use.shim.PasswordFileAuthenticator`) checks every connection against the file as it is then, so a
user added or removed takes effect at the next connection without a restart. Both compare in
constant time, and neither ever logs or prints a password or a hash.

A user name is what Spark sees as `current_user()`: letters, digits and `._@-`, not starting with `-`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from use.errors import ConfigError

__all__ = ["SCHEME", "PasswordEntry", "add_user", "check_user_name", "hash_password", "read_entries", "remove_user", "verify"]

SCHEME = "pbkdf2-sha256"
#: OWASP's recommendation for PBKDF2-HMAC-SHA256 (2023).
ITERATIONS = 600_000
_SALT_BYTES = 16
_USER_NAME = re.compile(r"[A-Za-z0-9._@][A-Za-z0-9._@-]{0,127}")


@dataclass(frozen=True)
class PasswordEntry:
    """One line of the file (the hash is kept only to verify and to write the file back)."""

    user: str
    iterations: int
    salt: bytes
    digest: bytes

    def line(self) -> str:
        b64 = base64.b64encode
        return f"{self.user}:{SCHEME}:{self.iterations}:{b64(self.salt).decode()}:{b64(self.digest).decode()}"

    def __repr__(self) -> str:  # never the hash, not even in a traceback's locals
        return f"PasswordEntry(user={self.user!r}, iterations={self.iterations})"


def check_user_name(user: str) -> str:
    """`user` if it is a valid user name; `ConfigError` naming what is allowed if not."""
    if not _USER_NAME.fullmatch(user):
        raise ConfigError(f"user name {user!r} is not allowed: use 1 to 128 letters, digits and '._@-' (not starting with '-')")
    return user


def hash_password(user: str, password: str, iterations: int = ITERATIONS, salt: bytes | None = None) -> PasswordEntry:
    """The entry for `user` with a fresh random salt (or `salt`)."""
    if not password:
        raise ConfigError(f"the password of {user!r} is empty; give a non-empty password")
    salt = secrets.token_bytes(_SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return PasswordEntry(check_user_name(user), iterations, salt, digest)


def verify(entries: dict[str, PasswordEntry], user: str, password: str) -> bool:
    """Whether `password` is `user`'s: the same decision `PasswordFileAuthenticator` makes in the
    JVM (an unknown user costs a hash too, so timing does not tell who exists)."""
    entry = entries.get(user)
    iterations = entry.iterations if entry is not None else ITERATIONS
    salt = entry.salt if entry is not None else b"\0" * _SALT_BYTES
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return entry is not None and bool(password) and hmac.compare_digest(digest, entry.digest)


def _parse(line: str, path: Path, number: int) -> PasswordEntry:
    parts = line.split(":")
    where = f"{path} line {number}"
    if len(parts) != 5 or parts[1] != SCHEME:
        raise ConfigError(f"{where} is not NAME:{SCHEME}:ITERATIONS:SALT:HASH; rewrite the user with `use passwd add`")
    user, _, iterations, salt, digest = parts
    try:
        entry = PasswordEntry(
            user, int(iterations), base64.b64decode(salt, validate=True), base64.b64decode(digest, validate=True)
        )
    except ValueError:
        raise ConfigError(f"{where} has a bad iteration count, salt or hash; rewrite the user with `use passwd add`") from None
    if entry.iterations < 1 or len(entry.digest) != 32:
        raise ConfigError(f"{where} has a bad iteration count or hash length; rewrite the user with `use passwd add`")
    check_user_name(user)
    return entry


def read_entries(path: str | os.PathLike[str]) -> dict[str, PasswordEntry]:
    """The users of a password file, by name; `ConfigError` if it cannot be read or a line is bad."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"password file {p} does not exist; create it with `use passwd --file {p} add USER`") from None
    except OSError as e:
        raise ConfigError(f"password file {p} cannot be read ({e.strerror})") from None
    entries: dict[str, PasswordEntry] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            entry = _parse(line, p, number)
            entries[entry.user] = entry
    return entries


def _write(path: Path, entries: dict[str, PasswordEntry]) -> None:
    """Replace the file atomically, readable by its owner only (it holds hashes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "# use serve --auth password: NAME:pbkdf2-sha256:ITERATIONS:SALT:HASH (written by `use passwd`)\n"
    text += "".join(e.line() + "\n" for e in sorted(entries.values(), key=lambda e: e.user))
    fd, tmp = tempfile.mkstemp(prefix=".passwd-", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def add_user(path: str | os.PathLike[str], user: str, password: str, iterations: int = ITERATIONS) -> bool:
    """Add `user` or set their password; True if the user was new. Creates the file if needed."""
    p = Path(path)
    entries = read_entries(p) if p.exists() else {}
    new = user not in entries
    entries[user] = hash_password(user, password, iterations)
    _write(p, entries)
    return new


def remove_user(path: str | os.PathLike[str], user: str) -> None:
    """Remove `user`; `ConfigError` if the file has no such user."""
    p = Path(path)
    entries = read_entries(p)
    if user not in entries:
        raise ConfigError(f"password file {p} has no user {user!r}; its users: {', '.join(sorted(entries)) or 'none'}")
    del entries[user]
    _write(p, entries)
