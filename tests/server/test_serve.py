"""`use serve` as a process: bad flags, one server per data dir, JDBC sessions, stop and restart.

Bad flags are refused before any JVM starts, so those tests cost a Python start each. The JDBC
tests share the session's server (`use_server`); the restart test stops that server and starts it
again on its data dir.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server_support import free_port

CLI = "import sys; from use.cli import main; sys.exit(main())"


def _serve(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, "serve", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def _assert_one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("use serve: error: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    "flags,fragments",
    [
        (["--conf", "spark.sql.shuffle.partitions"], ["not KEY=VALUE"]),
        (["--conf", "sql.shuffle.partitions=4"], ["start with 'spark.'"]),
        (["--conf", "spark.master=local[1]"], ["--master"]),
        (["--conf", "spark.hadoop.hive.server2.thrift.port=1"], ["--port"]),
        (["--conf", "spark.qbeast.use.optimization-interval=often"], ["optimization-interval", "'often'"]),
        (["--conf", "spark.qbeast.use.optimisation-interval=5s"],
         ["unknown key 'spark.qbeast.use.optimisation-interval'", "did you mean 'spark.qbeast.use.optimization-interval'?"]),
        (["--conf", "spark.qbeast.use.optimization.bytes-per-itr=5"],
         ["unknown optimization key", "did you mean 'spark.qbeast.use.optimization.bytes-per-iter'?"]),
        (["--port", "70000"], ["--port 70000"]),
        (["--host", "192.0.2.1"], ["not an address of this machine"]),
    ],
    ids=["conf-without-value", "conf-not-spark", "conf-owned-by-master", "conf-owned-by-port", "conf-bad-use-value",
         "conf-unknown-use-key", "conf-unknown-use-optimization-key", "port-out-of-range", "host-not-local"],
)  # fmt: skip
def test_bad_flags_are_one_line_errors_and_leave_nothing_behind(tmp_path: Path, flags, fragments) -> None:
    data = tmp_path / "data"
    done = _serve(["--data-dir", str(data), "--port", str(free_port()), *flags], tmp_path)
    _assert_one_line_error(done, *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["data"])
    assert not (data / "metastore_db").exists()


def test_a_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve(["--data-dir", str(tmp_path / "data"), "--port", str(port)], tmp_path)
    _assert_one_line_error(done, f"port {port}", "already in use", "--port")
    assert not (tmp_path / "data").exists()  # a failed start leaves a fresh data dir uncreated


def test_an_unwritable_data_dir_is_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = _serve(["--data-dir", str(blocker / "data"), "--port", str(free_port())], tmp_path)
    _assert_one_line_error(done, "--data-dir", "cannot be written")


def test_a_data_dir_serves_one_server_at_a_time(use_server, tmp_path: Path) -> None:
    done = _serve(["--data-dir", str(use_server.data_dir), "--port", str(free_port())], tmp_path)
    _assert_one_line_error(done, "in use by another `use serve`", "--data-dir")


def test_jdbc_sessions_share_the_servers_settings_but_not_their_state(use_server) -> None:
    first, second = use_server.connect(), use_server.connect()
    try:
        a, b = first.cursor(), second.cursor()
        a.execute("CREATE TEMPORARY VIEW only_in_first AS SELECT 1 AS x")
        a.execute("SET spark.sql.shuffle.partitions = 5")
        b.execute("SHOW VIEWS LIKE 'only_in_first'")
        assert b.fetchall() == []
        b.execute("SET spark.sql.shuffle.partitions")
        assert b.fetchall() == [("spark.sql.shuffle.partitions", "2")]  # the server's --conf
        for cursor in (a, b):  # USE's session default reaches every JDBC session
            cursor.execute("SET spark.sql.session.timeZone")
            assert cursor.fetchall() == [("spark.sql.session.timeZone", "UTC")]
    finally:
        first.close()
        second.close()


def test_errors_stay_clean_after_jdbc_sessions_closed(use_server) -> None:
    """Closing a JDBC session closes the URLClassLoader that `spark.jars` go into (Hive's
    SessionState.close); the shim must not depend on it: it is on the driver's class path."""
    from pyhive.exc import OperationalError

    for _ in range(2):
        connection = use_server.connect()
        connection.cursor().execute("SELECT 1")
        connection.close()
    connection = use_server.connect()
    try:
        with pytest.raises(OperationalError) as failure:
            connection.cursor().execute("SELECT * FROM no_such_table_after_closes")
    finally:
        connection.close()
    status = failure.value.args[0].status
    assert status.sqlState == "42P01"
    assert status.errorMessage.startswith("[TABLE_OR_VIEW_NOT_FOUND]"), status.errorMessage
    assert all("\tat " not in line and ".scala:" not in line for line in status.infoMessages), status.infoMessages


def test_restart_on_the_same_data_dir_finds_every_table_and_sigterm_stops_cleanly(use_server) -> None:
    """Stops the shared server and starts it again on its data dir (one JVM start, not two)."""
    server, data = use_server, use_server.data_dir
    connection = server.connect()
    cursor = connection.cursor()
    cursor.execute("DROP DATABASE IF EXISTS restart_check CASCADE")
    cursor.execute("CREATE DATABASE restart_check")
    cursor.execute("CREATE TABLE restart_check.orders (id INT, total DOUBLE) USING parquet")
    cursor.execute("INSERT INTO restart_check.orders VALUES (1, 9.5), (2, 20.0)")
    cursor.execute("CREATE TABLE restart_check.empty_one (id INT) USING parquet")
    cursor.execute("CREATE TABLE restart_check.lake USING delta PARTITIONED BY (p) AS SELECT id, id % 2 AS p FROM range(6)")
    connection.close()

    code = server.stop(signal.SIGTERM)
    assert code == 0, server.report()
    assert server.output.rstrip().endswith("use serve: stopped"), server.output
    assert "received SIGTERM" in server.log()
    assert list(server.workdir.iterdir()) == [], "the server left files in its working directory"
    assert not (data / "tmp").exists(), "the scratch directory survived the stop"
    assert not list((data / "metastore_db").glob("*.lck")), "Derby was not shut down"

    server.start()
    connection = server.connect()  # the ready line means it accepts connections now
    cursor = connection.cursor()
    cursor.execute("SELECT * FROM restart_check.orders ORDER BY id")
    assert cursor.fetchall() == [(1, 9.5), (2, 20.0)]
    cursor.execute("SHOW TABLES IN restart_check")
    assert sorted(row[1] for row in cursor.fetchall()) == ["empty_one", "lake", "orders"]
    cursor.execute("INSERT INTO restart_check.lake SELECT 6, 0")  # the Python side is registered again
    cursor.execute("SELECT p, count(*) FROM restart_check.lake GROUP BY p ORDER BY p")
    assert cursor.fetchall() == [(0, 4), (1, 3)]
    connection.close()


# The server's log line once the SparkContext is up (pyspark had put its own SIGINT handler in place
# by then) and before the metastore boots: a stop there used to end in a Py4JError traceback.
_SPARK_UP = "Spark session started; booting the metastore"


@pytest.mark.parametrize(
    "sig,to_group",
    [(signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["ctrl-c-to-the-process-group", "sigterm-to-the-python-process"],
)
def test_a_stop_during_startup_is_clean(tmp_path: Path, sig: signal.Signals, to_group: bool) -> None:
    """Ctrl-C in a terminal signals the whole process group (the JVM too) while the JVM boots."""
    from server_support import START_TIMEOUT_S, STOP_TIMEOUT_S
    from use.server import READY_PREFIX

    data, cwd = tmp_path / "data", tmp_path / "cwd"
    cwd.mkdir()
    log = data / "logs" / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", "--data-dir", str(data), "--port", str(free_port()),
         "--master", "local[2]", "--conf", "spark.driver.memory=1g"],
        cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (log.exists() and _SPARK_UP in log.read_text(errors="replace")):
            assert proc.poll() is None and time.monotonic() < deadline, f"no {_SPARK_UP!r} line:\n{proc.communicate()}"
            time.sleep(0.05)  # the line is written by another process: poll its log
        if to_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=STOP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}\n{text}"
    assert (out, err) == ("use serve: stopped\n", ""), (out, err)  # one message, no traceback, never ready
    assert f"received {sig.name}" in text and "stop requested while starting" in text, text
    assert "Traceback" not in text and "failed" not in text and READY_PREFIX not in out, text
    assert not (data / "tmp").exists() and list(cwd.iterdir()) == []
