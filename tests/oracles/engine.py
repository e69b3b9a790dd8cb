"""The client side of an oracle engine's process (`worker.py`): start it, send it requests, stop it.

One process serves every test of a run that asks for the engine (the session fixtures `delta_spark`
and `qbeast_spark` of tests/conftest.py): starting a JVM with an engine costs ~15 s here, a request
a second or less. Every request has a time limit, so a hung engine fails the test instead of the run.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa

from oracles import fetch

WORKER = Path(__file__).resolve().parent / "worker.py"
START_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 300.0

# Settings for a test-sized engine: few partitions (Delta replays its log with
# spark.databricks.delta.snapshotPartitions tasks, 50 by default), no UI, no progress bars.
SMALL = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
}
DELTA_SPARK_CONF = {
    **SMALL,
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",
}
QBEAST_SPARK_CONF = {
    **SMALL,
    "spark.sql.extensions": "io.qbeast.spark.internal.QbeastSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "io.qbeast.spark.internal.sources.catalog.QbeastCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",
}


class EngineError(Exception):
    """A request the engine answered with an exception; `java_class` names the JVM's (e.g.
    `io.delta.exceptions.ConcurrentAppendException`), `error_class` Spark's error condition."""

    def __init__(self, engine: str, reply: dict[str, Any]) -> None:
        self.java_class: str | None = reply.get("java_class")
        self.error_class: str | None = reply.get("error_class")
        self.type: str = reply.get("type", "")
        self.message: str = reply.get("message", "")
        self.traceback: str = reply.get("traceback", "")
        super().__init__(f"{engine}: {self.java_class or self.type}: {self.message}")

    @property
    def java_simple_name(self) -> str:
        return (self.java_class or "").rsplit(".", 1)[-1]


class EngineProcess:
    """A running engine. `sql` and `py` wait for their answer; `submit` sends a request and returns
    at once, so the caller can act while the engine works (concurrent writers), then `result`."""

    def __init__(self, name: str, python: Path | str, jars: list[Path], conf: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._ids = itertools.count()
        self._pending: int | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()
        cmd = [str(python), str(WORKER), "--name", name, "--jars", os.pathsep.join(str(j) for j in jars)]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_HOME", "PYTHONPATH"))}
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(python)
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env)
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._next(START_TIMEOUT_S)
        if not ready.get("ready"):
            raise RuntimeError(f"{name} did not start: {ready}\n{self.log_tail()}")
        self.spark_version: str = ready["spark"]
        self.startup_s: float = ready["startup_s"]
        self.pid: int = ready["pid"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._replies.put(line)
        self._replies.put(None)

    def _next(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.name} gave no answer in {timeout:.0f} s\n{self.log_tail()}") from None
        if line is None:
            raise RuntimeError(f"{self.name} exited ({self.proc.wait()})\n{self.log_tail()}")
        return json.loads(line)

    def log_tail(self, chars: int = 4000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def submit(self, request: dict[str, Any]) -> None:
        assert self._pending is None, "one request at a time"
        assert self.proc.stdin is not None
        self._pending = next(self._ids)
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def result(self, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        assert self._pending is not None, "nothing submitted"
        try:
            reply = self._next(timeout)
        finally:
            self._pending = None
        if not reply["ok"]:
            raise EngineError(self.name, reply)
        if "arrow" in reply:
            return pa.ipc.open_stream(base64.b64decode(reply["arrow"])).read_all()
        return reply.get("value")

    def sql(self, statement: str) -> pa.Table:
        self.submit({"op": "sql", "sql": statement})
        return self.result()

    def py(self, code: str, **args: Any) -> Any:
        self.submit({"op": "py", "code": code, "args": args})
        return self.result()

    def rss_bytes(self) -> int:
        """Resident memory of the engine's process tree (its Python and its JVM)."""
        return tree_rss(self.proc.pid)

    def close(self) -> None:
        """Stop the engine (its stdin closed: the worker stops its Spark and exits); a second call does nothing."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def tree_rss(pid: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            status = (entry / "status").read_text()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[int(entry.name)] = int(line.split()[1]) * 1024
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def start_delta_spark(log_dir: Path) -> EngineProcess:
    """delta-spark on the project's pyspark (this interpreter), its jars fetched and pinned."""
    return EngineProcess("delta-spark", sys.executable, fetch.delta_spark_jars(), DELTA_SPARK_CONF, log_dir / "delta-spark.log")


def start_qbeast_spark(log_dir: Path) -> EngineProcess:
    """qbeast-spark on pyspark 3.5 in its own virtualenv; `fetch.OracleUnavailable` when its jars
    cannot be had here."""
    jars = fetch.qbeast_spark_jars()
    return EngineProcess("qbeast-spark", fetch.pyspark35_python(), jars, QBEAST_SPARK_CONF, log_dir / "qbeast-spark.log")


def engine_fixture(start: Any, tmp_path_factory: Any) -> Any:
    """A session fixture's body: the engine for the run's tests, stopped after them; the tests
    skip, saying why, when the engine cannot be had here (`fetch.OracleUnavailable`). A failing
    test's report shows the end of the engine's log."""
    import pytest

    try:
        engine = start(tmp_path_factory.mktemp("oracle"))
    except fetch.OracleUnavailable as e:
        pytest.skip(str(e))
    try:
        yield engine
    finally:
        engine.close()
