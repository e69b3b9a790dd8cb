"""The password file of `use serve --auth password` and `use passwd` (pure: no JVM)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys

import pytest

from use.errors import ConfigError
from use.server.passwords import ITERATIONS, SCHEME, add_user, hash_password, read_entries, remove_user, verify

CLI = "import sys; from use.cli import main; sys.exit(main())"


def test_an_entry_is_a_salted_pbkdf2_sha256_of_the_password(tmp_path) -> None:
    path = tmp_path / "users"
    assert add_user(path, "alice", "pässwörd", iterations=1000) is True
    (line,) = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    user, scheme, iterations, salt, digest = line.split(":")
    assert (user, scheme, iterations) == ("alice", SCHEME, "1000")
    expected = hashlib.pbkdf2_hmac("sha256", "pässwörd".encode(), base64.b64decode(salt), 1000)
    assert base64.b64decode(digest) == expected and len(base64.b64decode(salt)) == 16
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert ITERATIONS >= 600_000  # OWASP's floor for PBKDF2-HMAC-SHA256


def test_verify_accepts_only_the_right_password(tmp_path) -> None:
    path = tmp_path / "users"
    add_user(path, "alice", "right", iterations=1000)
    add_user(path, "bob", "other", iterations=1000)
    entries = read_entries(path)
    assert verify(entries, "alice", "right")
    assert not verify(entries, "alice", "wrong")
    assert not verify(entries, "alice", "other")  # bob's password
    assert not verify(entries, "mallory", "right")
    assert not verify(entries, "alice", "")


def test_salts_differ_and_a_new_password_replaces_the_old(tmp_path) -> None:
    path = tmp_path / "users"
    add_user(path, "a", "same", iterations=1000)
    add_user(path, "b", "same", iterations=1000)
    entries = read_entries(path)
    assert entries["a"].salt != entries["b"].salt and entries["a"].digest != entries["b"].digest
    assert add_user(path, "a", "changed", iterations=1000) is False
    assert verify(read_entries(path), "a", "changed") and not verify(read_entries(path), "a", "same")
    remove_user(path, "a")
    assert sorted(read_entries(path)) == ["b"]


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("alice:plain:secret\n", "is not NAME:pbkdf2-sha256"),
        ("alice:pbkdf2-sha256:many:AAAA:AAAA\n", "bad iteration count"),
        ("alice:pbkdf2-sha256:10:AAAA:AAAA\n", "hash length"),
    ],
)
def test_a_bad_line_is_a_clear_error(tmp_path, text, fragment) -> None:
    path = tmp_path / "users"
    path.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        read_entries(path)


@pytest.mark.parametrize("user", ["", "-rf", "a:b", "a b", "x" * 129])
def test_bad_user_names_are_refused(tmp_path, user) -> None:
    with pytest.raises(ConfigError, match="user name"):
        hash_password(user, "pw", iterations=1)


def test_the_repr_never_shows_the_hash() -> None:
    entry = hash_password("alice", "pw", iterations=1)
    assert base64.b64encode(entry.digest).decode() not in repr(entry) and "digest" not in repr(entry)


def _passwd(tmp_path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-c", CLI, "passwd", "--file", str(tmp_path / "users"), *args],
        input=stdin, capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip


def test_use_passwd_adds_lists_and_removes_users_and_never_prints_a_hash(tmp_path) -> None:
    added = _passwd(tmp_path, "add", "alice", "--password-stdin", stdin="s3cret\n")
    assert added.returncode == 0 and added.stdout.strip() == f"added alice in {tmp_path / 'users'}", added.stderr
    assert _passwd(tmp_path, "add", "bob", "--password-stdin", stdin="other\n").returncode == 0
    assert verify(read_entries(tmp_path / "users"), "alice", "s3cret")
    listed = _passwd(tmp_path, "list")
    assert listed.stdout.split() == ["alice", "bob"]
    removed = _passwd(tmp_path, "remove", "alice")
    assert removed.returncode == 0 and _passwd(tmp_path, "list").stdout.split() == ["bob"]
    missing = _passwd(tmp_path, "remove", "alice")
    assert missing.returncode == 2 and "has no user 'alice'" in missing.stderr
    no_tty = _passwd(tmp_path, "add", "carol")
    assert no_tty.returncode == 2 and "--password-stdin" in no_tty.stderr
    entry = read_entries(tmp_path / "users")["bob"].line().split(":")
    for done in (added, listed, removed, missing, no_tty):
        assert "s3cret" not in done.stdout + done.stderr and entry[4] not in done.stdout + done.stderr
