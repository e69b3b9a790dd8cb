"""`use.server.config`: the server's options, data dir layout and Spark conf (no JVM)."""

from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

import pytest

from use.errors import ConfigError, ServerError
from use.server.config import (
    DataDir,
    ServerOptions,
    check_data_dir,
    check_port_free,
    parse_conf_pairs,
    spark_conf,
)


def test_conf_pairs_split_at_the_first_equals_sign_and_later_keys_win() -> None:
    conf = parse_conf_pairs(["spark.a=1", "spark.b=x=y", "spark.a=2", "spark.qbeast.use.optimization-interval=30s"])
    assert conf == {"spark.a": "2", "spark.b": "x=y", "spark.qbeast.use.optimization-interval": "30s"}


@pytest.mark.parametrize(
    "pair,fragment",
    [
        ("spark.a", "not KEY=VALUE"),
        ("=1", "not KEY=VALUE"),
        ("a.b=1", "start with 'spark.'"),
        ("spark.sql.warehouse.dir=/x", "--data-dir"),
        ("spark.sql.catalogImplementation=in-memory", "Hive metastore"),
        ("spark.qbeast.use.optimization.bytes-per-iter=-5", "bytes-per-iter"),
    ],
)
def test_bad_conf_pairs_are_refused_with_what_to_do(pair: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_conf_pairs([pair])
    assert fragment in str(e.value)


def test_options_resolve_the_data_dir_and_build_the_jdbc_url(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    options = ServerOptions.from_flags()
    assert options.data_dir.root == tmp_path / "use-data"
    assert options.jdbc_url == "jdbc:hive2://127.0.0.1:10000/default"
    assert ServerOptions.from_flags(host="0.0.0.0", port=10001).jdbc_url == "jdbc:hive2://127.0.0.1:10001/default"
    assert ServerOptions.from_flags(host="::1").jdbc_url == "jdbc:hive2://[::1]:10000/default"
    with pytest.raises(ConfigError, match="--port 0"):
        ServerOptions.from_flags(port=0)


def test_spark_conf_keeps_every_file_under_the_data_dir(tmp_path: Path) -> None:
    root = tmp_path / "a dir"
    options = ServerOptions.from_flags(
        root, port=10042, conf_pairs=["spark.driver.extraJavaOptions=-Dmine=1", "spark.sql.shuffle.partitions=3"]
    )
    conf = spark_conf(options)
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == f"jdbc:derby:;databaseName={root}/metastore_db;create=true"
    assert conf["spark.sql.warehouse.dir"] == str(root / "warehouse")
    assert conf["spark.hadoop.hive.server2.thrift.port"] == "10042"
    assert conf["spark.hadoop.hive.server2.thrift.bind.host"] == "127.0.0.1"
    assert conf["spark.sql.shuffle.partitions"] == "3"
    java_options = shlex.split(conf["spark.driver.extraJavaOptions"])
    assert java_options == [
        f"-Dderby.stream.error.file={root}/logs/derby.log",
        f"-Djava.io.tmpdir={root}/tmp",
        "-Dmine=1",
    ]
    # derby.system.home made every JDBC session close retry for ~20 s
    assert not any("derby.system.home" in value for value in conf.values())


def test_check_data_dir_creates_the_layout_or_says_it_cannot(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "new" / "data")
    check_data_dir(data)
    assert data.warehouse.is_dir() and data.logs.is_dir()
    assert sorted(p.name for p in data.root.iterdir()) == ["logs", "warehouse"]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ServerError, match="cannot be written"):
        check_data_dir(DataDir(blocker / "data"))


def test_check_port_free_sees_a_listening_socket() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            check_port_free("127.0.0.1", port)
    check_port_free("127.0.0.1", port)
    with pytest.raises(ServerError, match="cannot be resolved"):
        check_port_free("no-such-host.invalid", port)


def test_the_server_runs_the_optimization_service_with_fair_scheduling_unless_told_not_to(tmp_path: Path) -> None:
    from use.server.process import default_services

    options = ServerOptions.from_flags(tmp_path / "data")
    assert [s.name for s in default_services(options)] == ["optimization"]
    assert options.data_dir.service == tmp_path / "data" / "service"
    assert spark_conf(options)["spark.scheduler.mode"] == "FAIR"
    fifo = ServerOptions.from_flags(tmp_path / "data", conf_pairs=["spark.scheduler.mode=FIFO"])
    assert spark_conf(fifo)["spark.scheduler.mode"] == "FIFO"  # a --conf wins over the service's default
    assert default_services(ServerOptions.from_flags(tmp_path / "data", service=False)) == []


def test_the_demo_interval_yields_to_a_conf_of_the_caller(tmp_path: Path) -> None:
    from use.optimize.config import INTERVAL_KEY
    from use.server.demo import DEMO_INTERVAL, demo_conf

    assert ServerOptions.from_flags(tmp_path, conf_pairs=demo_conf([])).conf[INTERVAL_KEY] == DEMO_INTERVAL
    mine = demo_conf([f"{INTERVAL_KEY}=2s"])
    assert ServerOptions.from_flags(tmp_path, conf_pairs=mine).conf[INTERVAL_KEY] == "2s"


def test_the_demo_prints_client_commands_that_work_from_any_directory(tmp_path: Path) -> None:
    """Run from a directory that is not the repository's root (no `.venv` there): the beeline
    classpath command finds pyspark's jars, the PyHive one imports pyhive and only fails to connect
    (nothing listens on the port)."""
    import subprocess

    from server_support import free_port
    from use.server.demo import print_demo

    options = ServerOptions.from_flags(tmp_path / "data", port=free_port())
    printed: list[str] = []
    print_demo(options, printed.append)

    def bash(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)

    beeline = next(line for line in printed if "java -cp" in line)
    classpath = beeline.split('"', 1)[1].rsplit('"', 1)[0]  # "$(python -c ...)/jars/*"
    jars = bash(f'echo "{classpath}"')
    assert jars.returncode == 0 and jars.stderr == "", jars.stderr
    assert Path(jars.stdout.strip()).parent.is_dir() and any(Path(jars.stdout.strip()).parent.glob("spark-core*.jar"))

    pyhive = printed[printed.index("or with PyHive:") + 1]
    done = bash(pyhive)
    assert done.returncode != 0 and "ModuleNotFoundError" not in done.stderr and "No such file" not in done.stderr, done.stderr
    assert "TTransportException" in done.stderr or "Could not connect" in done.stderr, done.stderr
    text = "\n".join(printed)
    assert shlex.quote(sys.executable) in text and "$(.venv/" not in text and "  .venv/" not in text


# --- authentication and confined file access ----------------------------------------------------


def test_auth_flags_become_hive_settings_and_system_properties(tmp_path: Path) -> None:
    from use.server.config import AuthOptions
    from use.server.passwords import add_user

    users = tmp_path / "users"
    add_user(users, "alice", "pw", iterations=1000)
    auth = AuthOptions.from_flags("password", str(users))
    conf = spark_conf(ServerOptions.from_flags(tmp_path / "data", auth=auth))
    assert conf["spark.hadoop.hive.server2.authentication"] == "CUSTOM"
    assert conf["spark.hadoop.hive.server2.custom.authentication.class"] == "use.shim.PasswordFileAuthenticator"
    java = shlex.split(conf["spark.driver.extraJavaOptions"])
    assert f"-Duse.auth.passwordFile={users}" in java and "-Dhive.server2.authentication=CUSTOM" in java
    ldap = AuthOptions.from_flags("ldap", ldap_url="ldap://127.0.0.1:389", ldap_base_dn="ou=people,dc=x")
    conf = spark_conf(ServerOptions.from_flags(tmp_path / "data", auth=ldap))
    assert conf["spark.hadoop.hive.server2.authentication.ldap.url"] == "ldap://127.0.0.1:389"
    assert "-Dhive.server2.authentication.ldap.baseDN=ou=people,dc=x" in shlex.split(conf["spark.driver.extraJavaOptions"])
    assert "pw" not in " ".join(conf.values()).split()  # the file's path goes along, never a password


@pytest.mark.parametrize(
    "mode,kwargs,fragment",
    [
        ("password", {}, "needs --password-file"),
        ("password", {"password_file": "/no/such/file"}, "does not exist"),
        ("ldap", {"ldap_base_dn": "ou=x"}, "needs --ldap-url"),
        ("ldap", {"ldap_url": "http://x", "ldap_base_dn": "ou=x"}, "needs --ldap-url"),
        ("ldap", {"ldap_url": "ldap://x"}, "needs --ldap-base-dn"),
        (None, {"password_file": "/x"}, "--password-file is for --auth password"),
        ("none", {"ldap_url": "ldap://x"}, "are for --auth ldap"),
        ("kerberos", {}, "not one of"),
    ],
)
def test_bad_auth_flags_are_refused(mode, kwargs, fragment) -> None:
    from use.server.config import AuthOptions

    with pytest.raises(ConfigError, match=fragment):
        AuthOptions.from_flags(mode, **kwargs)


def test_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    from use.server.config import AuthOptions

    (tmp_path / "users").write_text("# nobody yet\n")
    with pytest.raises(ConfigError, match="has no users"):
        AuthOptions.from_flags("password", str(tmp_path / "users"))


def test_a_network_host_needs_an_explicit_auth(tmp_path: Path) -> None:
    from use.server.config import AuthOptions, check_exposure

    for host in ("0.0.0.0", "192.0.2.1", "::"):
        with pytest.raises(ConfigError, match="--auth none"):
            check_exposure(ServerOptions.from_flags(tmp_path, host=host))
        check_exposure(ServerOptions.from_flags(tmp_path, host=host, auth=AuthOptions.from_flags("none")))
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_exposure(ServerOptions.from_flags(tmp_path, host=host))


def test_the_roots_and_administrators_of_a_server(tmp_path: Path, monkeypatch) -> None:
    import getpass

    from use.optimize.keys import ADMINS_KEY, ALLOWED_ROOTS_KEY
    from use.server.config import AuthOptions
    from use.server.passwords import add_user

    monkeypatch.chdir(tmp_path)
    options = ServerOptions.from_flags("data", allowed_roots=["lake", "/srv/x"])
    conf = spark_conf(options)
    assert conf[ALLOWED_ROOTS_KEY].split(",") == [
        str(tmp_path / "data"),
        str(tmp_path / "data" / "warehouse"),
        str(tmp_path / "lake"),
        "/srv/x",
    ]
    assert conf[ADMINS_KEY] == getpass.getuser()  # no authentication: the server is its owner's
    add_user(tmp_path / "users", "alice", "pw", iterations=1000)
    auth = AuthOptions.from_flags("password", str(tmp_path / "users"))
    assert spark_conf(ServerOptions.from_flags("data", auth=auth))[ADMINS_KEY] == ""  # nobody unless named
    assert spark_conf(ServerOptions.from_flags("data", auth=auth, admins=["alice,bob", "carol"]))[ADMINS_KEY] == "alice,bob,carol"
    with pytest.raises(ConfigError, match="user name"):
        ServerOptions.from_flags("data", admins=["no body"])
    for key in (ALLOWED_ROOTS_KEY, ADMINS_KEY, "spark.qbeast.use.session.user", "spark.hadoop.hive.server2.authentication"):
        with pytest.raises(ConfigError, match="cannot be set"):
            parse_conf_pairs([f"{key}=x"])
