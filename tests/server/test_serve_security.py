"""`use serve` as BI tools reach it: authentication (`--auth password`, `--auth ldap`) and confined
file access (`spark.qbeast.use.allowedRoots`), through real JDBC clients (PyHive, beeline).

One password-authenticated server (`secure`) on a fresh data dir with the default roots (its data dir
and warehouse) serves the authentication and the confinement tests; the LDAP test starts a real
slapd (Debian's package, installed by `make setup`) and a server authenticating against it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from golden import beeline_command
from server_support import ServerProcess, free_port
from use.server.passwords import add_user, read_entries, remove_user

PASSWORDS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2", "dana": "dana-Secret-3"}
DENIED = "42501"


# --- servers and clients ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    root = tmp_path_factory.mktemp("use-serve-secure")
    password_file = root / "users"
    for user in ("alice", "bob"):
        add_user(password_file, user, PASSWORDS[user])
    server = ServerProcess(
        root / "data", root / "cwd", args=("--auth", "password", "--password-file", str(password_file), "--admin", "alice")
    )
    server.password_file = password_file  # type: ignore[attr-defined]
    server.start()
    yield server
    assert server.stop(signal.SIGTERM) == 0, server.report()
    assert not (server.data_dir / "serve.lock").exists()  # a clean stop removes its lock


def _connect(server, user: str, password: str, auth: str = "CUSTOM", **kwargs):
    from pyhive import hive

    return hive.connect(host=server.host, port=server.port, username=user, password=password, auth=auth, **kwargs)


def _run(server, user: str, *statements: str, auth: str = "CUSTOM"):
    """Run statements as `user` in one session: the last one's rows, or (sqlstate, message) of the
    first that fails."""
    from pyhive.exc import DatabaseError

    conn = _connect(server, user, PASSWORDS[user], auth)
    try:
        cur = conn.cursor()
        rows = None
        for statement in statements:
            try:
                cur.execute(statement)
            except DatabaseError as exc:
                status = exc.args[0].status
                return status.sqlState, status.errorMessage
            rows = cur.fetchall() if cur.description else None
        return rows
    finally:
        conn.close()


def _ok(result) -> None:
    """A statement that succeeded (rows or none): not an error's (sqlstate, message)."""
    assert not isinstance(result, tuple), result


def _refused_login(server, user: str, password: str, auth: str = "CUSTOM") -> str:
    with pytest.raises(Exception) as caught:  # thrift's transport error: the SASL exchange failed
        _connect(server, user, password, auth).close()
    return str(caught.value)


def _beeline(server, user: str, password: str, statement: str) -> subprocess.CompletedProcess[str]:
    cmd = beeline_command(server.url, Path("unused"))
    cmd = cmd[: cmd.index("-n")] + [
        "-n",
        user,
        "-p",
        password,
        "--outputformat=tsv2",
        "--showHeader=false",
        "--silent=true",
        "-e",
        statement,
    ]
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300, check=False)


# --- authentication -----------------------------------------------------------------------------


def test_the_right_password_connects_as_that_user(secure) -> None:
    assert _run(secure, "alice", "SELECT current_user()") == [("alice",)]
    assert _run(secure, "bob", "SELECT current_user()") == [("bob",)]


def test_a_wrong_password_and_an_unknown_user_are_refused(secure) -> None:
    assert "Error validating the login" in _refused_login(secure, "alice", "not-her-password")
    assert "Error validating the login" in _refused_login(secure, "mallory", "anything")
    assert "Error validating the login" in _refused_login(secure, "alice", "")
    log = secure.log()
    assert "authentication failed for user 'alice'" in log and "authentication failed for user 'mallory'" in log


def test_beeline_connects_with_the_password_and_is_refused_without(secure) -> None:
    done = _beeline(secure, "bob", PASSWORDS["bob"], "SELECT current_user()")
    assert done.returncode == 0 and done.stdout.split()[-1] == "bob", done.stdout + done.stderr
    done = _beeline(secure, "bob", "wrong", "SELECT current_user()")
    assert done.returncode != 0 and "Error validating the login" in done.stdout + done.stderr, done.stdout + done.stderr


def test_use_passwd_changes_count_at_the_next_connection(secure) -> None:
    add_user(secure.password_file, "dana", PASSWORDS["dana"])
    assert _run(secure, "dana", "SELECT current_user()") == [("dana",)]
    remove_user(secure.password_file, "dana")
    assert "Error validating the login" in _refused_login(secure, "dana", PASSWORDS["dana"])


def test_the_user_reaches_commit_infos_and_the_log(secure) -> None:
    _ok(_run(secure, "bob", "CREATE TABLE by_bob (id BIGINT) USING delta", "INSERT INTO by_bob VALUES (1), (2)"))
    history = _run(
        secure, "alice", "SELECT version, user_name FROM use_catalog.spark_catalog.default.by_bob.history ORDER BY version"
    )
    assert history == [(0, "bob"), (1, "bob")], history
    for version in (0, 1):
        commit = secure.data_dir / "warehouse" / "by_bob" / "_delta_log" / f"{version:020d}.json"
        assert '"userName":"bob"' in commit.read_text()
    assert "opened by user 'bob'" in secure.log()


def test_no_password_or_hash_is_ever_logged(secure) -> None:
    _run(secure, "alice", "SELECT 1")
    _refused_login(secure, "bob", "bob-guess-123")
    secrets = [*PASSWORDS.values(), "bob-guess-123"]
    for entry in read_entries(secure.password_file).values():
        line = entry.line().split(":")
        secrets += [line[3], line[4]]  # salt and hash, as the file holds them
    logs = [p for p in secure.data_dir.rglob("*.log")] + [p for p in secure.data_dir.glob("logs/*")]
    texts = {str(p): p.read_text(errors="replace") for p in set(logs) if p.is_file()}
    texts["output"] = secure.output
    leaked = [(name, s) for name, text in texts.items() for s in secrets if s in text]
    assert leaked == []


# --- confined file access -----------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path) -> Path:
    """A directory outside the server's roots with a secret file and an unrelated file."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("top secret\n")
    (d / "unrelated.bin").write_bytes(b"\x00keep me\x01")
    return d


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def _assert_denied(result, *fragments: str) -> None:
    assert isinstance(result, tuple) and result[0] == DENIED, result
    assert "USE_ACCESS_DENIED_ERROR" in result[1], result
    for fragment in fragments:
        assert fragment in result[1], result


def _repros(outside: Path, data: Path) -> list[tuple[str, list[str]]]:
    """The reproductions of the issue, as (name, statements): the last statement must be refused."""
    o = str(outside)
    return [
        ("text", [f"SELECT * FROM text.`{o}/secret.txt`"]),
        ("binaryFile", [f"SELECT * FROM binaryFile.`{o}`"]),
        ("csv", [f"SELECT * FROM csv.`{o}/secret.txt`"]),
        ("json", [f"SELECT * FROM json.`{o}`"]),
        ("create-location", [f"CREATE TABLE leak USING text LOCATION '{o}'"]),
        ("insert-overwrite-directory", [f"INSERT OVERWRITE DIRECTORY '{o}' USING parquet SELECT 1"]),
        ("insert-overwrite-local-directory", [f"INSERT OVERWRITE LOCAL DIRECTORY '{o}' USING parquet SELECT 1"]),
        ("ctas-non-empty", [f"CREATE TABLE clobber USING parquet LOCATION '{o}' AS SELECT 1 AS a"]),
        ("ctas-anywhere", [f"CREATE TABLE anywhere USING parquet LOCATION '{o}/new' AS SELECT 1 AS a"]),
        ("ctas-delta", [f"CREATE TABLE anywhere_d USING delta LOCATION '{o}/d' AS SELECT 1 AS a"]),
        ("delta-path", [f"SELECT * FROM delta.`{o}/table`"]),
        ("dot-dot", [f"SELECT * FROM text.`{data}/{os.path.relpath(outside, data)}/secret.txt`"]),
        ("symlink", [f"SELECT * FROM text.`{data}/escape/secret.txt`"]),
        ("symlinked-location", [f"CREATE TABLE via_link USING parquet LOCATION '{data}/escape/x' AS SELECT 1 AS a"]),
        ("add-jar", [f"ADD JAR '{o}/unrelated.bin'"]),
        ("load-data", ["CREATE TABLE IF NOT EXISTS loaded (line STRING) USING hive", f"LOAD DATA LOCAL INPATH '{o}/secret.txt' INTO TABLE loaded"]),
        ("alter-location", ["CREATE TABLE IF NOT EXISTS moved (a INT) USING parquet", f"ALTER TABLE moved SET LOCATION '{o}'"]),
        ("vacuum-path", [f"CALL use_catalog.system.vacuum(table => '{o}/table', force => true, retention_hours => 0)"]),
    ]  # fmt: skip


def test_every_reproduction_is_refused_and_leaves_the_files_outside_untouched(secure, outside: Path, tmp_path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    data = secure.data_dir
    write_deltalake(str(outside / "table"), pa.table({"id": [1, 2, 3]}))
    (outside / "table" / "not-a-table-file.parquet").write_bytes(b"unrelated")
    escape = data / "escape"
    if not escape.is_symlink():
        os.symlink(outside, escape)
    before = _snapshot(outside)
    failures = []
    for name, statements in _repros(outside, data):
        result = _run(secure, "alice", *statements)
        if not (isinstance(result, tuple) and result[0] == DENIED and "USE_ACCESS_DENIED_ERROR" in result[1]):
            failures.append((name, result))
        elif "--allowed-root" not in result[1]:
            failures.append((name, "no hint", result))
    assert failures == []
    assert _snapshot(outside) == before
    assert not (outside / "new").exists() and not (outside / "d").exists()


def test_protected_settings_cannot_be_set_by_a_session(secure, outside: Path) -> None:
    before = _snapshot(outside)
    for key, value in (
        ("spark.sql.legacy.allowNonEmptyLocationInCTAS", "true"),
        ("spark.databricks.delta.retentionDurationCheck.enabled", "false"),
        ("spark.qbeast.use.allowedRoots", "/"),
        ("spark.qbeast.use.admins", "bob"),
        ("spark.qbeast.use.session.user", "alice"),
    ):
        _assert_denied(_run(secure, "bob", f"SET {key}={value}"), key)
        with pytest.raises(Exception, match="USE_ACCESS_DENIED_ERROR"):  # nor with the connection
            _connect(secure, "bob", PASSWORDS["bob"], configuration={key: value}).close()
    _assert_denied(_run(secure, "bob", f"CREATE TABLE clobber USING parquet LOCATION '{outside}' AS SELECT 1 AS a"), str(outside))
    assert _snapshot(outside) == before
    assert _run(secure, "bob", "SET spark.sql.shuffle.partitions=3", "SELECT 1") == [(1,)]  # other settings: as ever


def test_vacuum_force_is_for_administrators(secure) -> None:
    _ok(_run(secure, "alice", "CREATE TABLE swept USING delta AS SELECT id FROM range(10)"))
    _ok(_run(secure, "alice", "INSERT OVERWRITE swept SELECT id FROM range(5)"))
    vacuum = "CALL use_catalog.system.vacuum(table => 'swept', force => true, retention_hours => 0)"

    def files() -> dict[str, int]:
        return {
            str(f): f.stat().st_mtime_ns
            for f in (secure.data_dir / "warehouse" / "swept").rglob("*.parquet")
            if "_delta_log" not in f.parts
        }

    before = files()
    _assert_denied(_run(secure, "bob", vacuum), "administrators", "bob")
    assert files() == before
    # a dry run deletes nothing, so anyone may ask what a forced vacuum would delete
    dry = _run(secure, "bob", vacuum.replace("force => true", "dry_run => true, force => true"))
    assert isinstance(dry, list) and dry and not any(deleted for _, _, deleted in dry), dry
    assert files() == before
    rows = _run(secure, "alice", vacuum)
    assert isinstance(rows, list) and rows and len(files()) == len(before) - len(rows)  # the overwritten files
    assert sorted(path for path, _, _ in rows) == sorted(path for path, _, _ in dry)  # what the dry run listed
    assert _run(secure, "bob", "CALL use_catalog.system.vacuum(table => 'swept', dry_run => true)") == []  # without force: anyone


def test_the_same_statements_inside_the_data_dir_work(secure) -> None:
    inside = secure.data_dir / "inside"
    inside.mkdir(exist_ok=True)
    (inside / "secret.txt").write_text("not a secret here\n")
    i = str(inside)
    assert _run(secure, "alice", f"SELECT * FROM text.`{i}/secret.txt`") == [("not a secret here",)]
    assert _run(secure, "alice", f"SELECT count(*) FROM binaryFile.`{i}/secret.txt`") == [(1,)]
    assert _run(secure, "alice", f"SELECT * FROM csv.`{i}/secret.txt`") == [("not a secret here",)]
    assert _run(secure, "alice", f"CREATE TABLE here USING text LOCATION '{i}'", "SELECT count(*) FROM here") == [(1,)]
    _ok(_run(secure, "alice", f"INSERT OVERWRITE DIRECTORY '{i}/dir' USING parquet SELECT 1 AS a"))
    assert _run(secure, "alice", f"SELECT * FROM parquet.`{i}/dir`") == [(1,)]
    assert _run(
        secure, "alice", f"CREATE TABLE there USING delta LOCATION '{i}/d' AS SELECT 7 AS a", f"SELECT * FROM delta.`{i}/d`"
    ) == [(7,)]
    assert _run(secure, "alice", f"SELECT * FROM text.`{secure.data_dir}/warehouse/../inside/secret.txt`") == [
        ("not a secret here",)
    ]
    assert _run(secure, "alice", f"CALL use_catalog.system.vacuum(table => '{i}/d', dry_run => true)") == []


# --- flags --------------------------------------------------------------------------------------


_CLI = "import sys; from use.cli import main; sys.exit(main())"


def test_a_network_host_needs_auth(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CLI, "serve", "--data-dir", str(tmp_path / "data"), "--host", "0.0.0.0", "--port", str(free_port())],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--auth password" in done.stderr and "--auth none" in done.stderr and "lets other machines connect" in done.stderr


def test_auth_none_on_a_network_host_starts_with_a_warning(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLI, "serve", "--data-dir", str(tmp_path / "data"), "--host", "0.0.0.0", "--auth", "none",
         "--port", str(free_port())],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert first.startswith("use serve: warning: --auth none on --host 0.0.0.0"), first
    log = tmp_path / "data" / "logs" / "server.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "starting:" in log.read_text()):  # the server's stop handler is in place
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # a stop while starting is clean (test_serve.py)
    assert proc.wait(120) == 0


# --- LDAP ---------------------------------------------------------------------------------------


_LDIF = """dn: dc=use,dc=test
objectClass: dcObject
objectClass: organization
o: use
dc: use

dn: ou=people,dc=use,dc=test
objectClass: organizationalUnit
ou: people

dn: uid=carol,ou=people,dc=use,dc=test
objectClass: inetOrgPerson
uid: carol
cn: Carol
sn: C
userPassword: {password}
"""
_SLAPD_CONF = """include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {root}/slapd.pid
database mdb
suffix "dc=use,dc=test"
rootdn "cn=admin,dc=use,dc=test"
directory {root}/db
"""
LDAP_PASSWORD = "carol-Secret-4"


@pytest.fixture(scope="module")
def ldap_url(tmp_path_factory):
    """A real OpenLDAP server (Debian's slapd, installed by `make setup`) on a free loopback port,
    with the user carol (loaded with slapadd before it starts)."""
    slapd, slapadd = shutil.which("slapd") or "/usr/sbin/slapd", shutil.which("slapadd") or "/usr/sbin/slapadd"
    if not (os.path.exists(slapd) and os.path.exists(slapadd) and os.path.isdir("/etc/ldap/schema")):
        pytest.skip("slapd is not installed (make setup installs Debian's slapd and ldap-utils with apt-get)")
    root = tmp_path_factory.mktemp("slapd")
    (root / "db").mkdir()
    conf = root / "slapd.conf"
    conf.write_text(_SLAPD_CONF.format(root=root))
    (root / "users.ldif").write_text(_LDIF.format(password=LDAP_PASSWORD))
    subprocess.run([slapadd, "-f", str(conf), "-l", str(root / "users.ldif")], check=True, capture_output=True, timeout=60)
    port = free_port()
    url = f"ldap://127.0.0.1:{port}"
    log = open(root / "slapd.log", "w")
    proc = subprocess.Popen([slapd, "-d", "0", "-f", str(conf), "-h", f"{url}/"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    import socket

    while True:  # readiness: the port accepts connections
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"slapd did not start: {(root / 'slapd.log').read_text()}") from None
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(30)
    log.close()


def test_ldap_authenticates_against_a_real_directory(ldap_url, tmp_path_factory) -> None:
    root = tmp_path_factory.mktemp("use-serve-ldap")
    server = ServerProcess(
        root / "data", root / "cwd", args=("--auth", "ldap", "--ldap-url", ldap_url, "--ldap-base-dn", "ou=people,dc=use,dc=test")
    )
    server.start()
    try:
        conn = _connect(server, "carol", LDAP_PASSWORD, auth="LDAP")
        cur = conn.cursor()
        cur.execute("SELECT current_user()")
        assert cur.fetchall() == [("carol",)]
        conn.close()
        assert "Error validating the login" in _refused_login(server, "carol", "wrong", auth="LDAP")
        assert "Error validating the login" in _refused_login(server, "nobody", LDAP_PASSWORD, auth="LDAP")
        assert LDAP_PASSWORD not in server.log() + server.output
    finally:
        assert server.stop(signal.SIGTERM) == 0, server.report()
