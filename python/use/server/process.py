"""The `use serve` process: one SparkSession with the Hive metastore, Spark's Thrift server inside
it for JDBC/ODBC clients, and room for long-running services beside them.

Why in-process: the Thrift server then shares the session that `use.session.spark_session` built,
so every JDBC session gets what USE sets up there (the SQL extension, the catalogs and every other
static conf are copied by Spark into each new session) and Python code (py4j callbacks, services)
runs in the same driver.

Lifecycle, in order: the data directory is checked and locked (one server per directory); the
JVM is started with its stdout/stderr sent to the server's log, so the console shows only the
server's own lines; the Thrift server is started and the port polled until it accepts
connections; the views of the lake-wide insight tables in `use_insights` are (re)created, where
BI tools find them (`use.server.insight_views`); then the services start, and only then is the
server ready. A stop (SIGINT or
SIGTERM, or `request_stop`) runs the same steps backwards: services first (they may still need
Spark to finish their current step), the Thrift server, Spark, the Derby metastore (shut down so
the next start finds a clean database), the JVM, the scratch directory, the lock. A stop requested
while the server is still starting (Ctrl-C while the JVM boots) is honoured between the start's
steps: what was started is stopped the same way, and the stop is as clean as one after the start.

Services (the continuous optimization service lives here) implement `Service`: `start(spark)`
starts their own thread and returns, `stop()` returns once they have ended their current step.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from py4j.protocol import Py4JJavaError
from pyspark import SparkContext

from use.errors import ServerError, UseError
from use.runtime.jvm import driver_jvm
from use.runtime.shim import shim_loaded
from use.server.config import READY_PREFIX, ServerOptions, check_data_dir, check_exposure, check_port_free, spark_conf
from use.server.insight_views import create_insight_views
from use.service import LocationSource, OptimizationService
from use.service.metastore import CombinedSource, MetastoreEvents, MetastoreSource
from use.session import spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Service", "UseServer", "default_services", "serve"]

log = logging.getLogger("use.server")
log.addHandler(logging.NullHandler())  # until the data dir's log is open: never Python's stderr fallback
# The loggers whose INFO lines go to the data dir's log (the server's own and its services'); other
# loggers' warnings go there too (`UseServer._open_log`).
_LOGGERS = ("use.server", "use.service")
for _name in _LOGGERS[1:]:
    logging.getLogger(_name).addHandler(logging.NullHandler())

# How long the Thrift server may take to listen once started (it returned in under half a second
# in every measurement; the margin is for a loaded machine).
_LISTEN_TIMEOUT_S = 120.0
# How long the JVM may take to exit once Spark is stopped and its stdin is closed.
_JVM_EXIT_TIMEOUT_S = 30.0
# SQLStates of the SQLException Derby raises when a database shut down as asked, and when it was
# not booted in this JVM (a stop before the metastore was opened): nothing to shut down.
_DERBY_SHUTDOWN_OK = ("08006", "XJ004")


class _StopDuringStart(Exception):
    """A stop was requested while `UseServer.start` ran: it unwinds to `start`, which stops what was
    started and returns None (not an error: the user asked for it)."""


class Service(Protocol):
    """A long-running job inside `use serve` (e.g. the continuous optimization service)."""

    name: str

    def start(self, spark: SparkSession) -> None:
        """Start the service's own thread(s) on the server's session and return at once."""

    def stop(self) -> None:
        """Ask the service to stop and return once it has ended its current step."""


class UseServer:
    """One server process: `start()`, then `wait()` until a stop is requested, then `stop()`."""

    def __init__(self, options: ServerOptions, services: Sequence[Service] | None = None) -> None:
        """`services` None: the default ones (`default_services`)."""
        self.options = options
        self.services = tuple(default_services(options) if services is None else services)
        self.spark: SparkSession | None = None
        self._thrift: Any = None
        self._started_services: list[Service] = []
        self._stop_requested = threading.Event()
        self._stopped = False
        self._lock_fd: int | None = None
        self._log_handler: logging.Handler | None = None

    # --- start -------------------------------------------------------------------------------

    def start(self) -> str | None:
        """Start everything and return the JDBC URL once the Thrift server accepts connections;
        `ServerError` (with everything started so far stopped again) if it cannot. None if a stop
        was requested meanwhile (`request_stop`, e.g. from a signal handler): it is honoured between
        steps, and everything started so far is stopped again.

        Call it off the main thread when signals should stop it (`serve` does): pyspark's
        SparkContext, built on the main thread, replaces the SIGINT handler with one that raises
        KeyboardInterrupt into whatever py4j call is running."""
        d = self.options.data_dir
        # What can be checked without touching the data dir first: a failed start leaves a fresh
        # data dir as it found it (nothing created).
        check_port_free(self.options.host, self.options.port)
        check_exposure(self.options)
        check_data_dir(d)
        self._lock()
        try:
            self._check_stop()
            shutil.rmtree(d.tmp, ignore_errors=True)  # scratch of a previous run that was killed
            d.tmp.mkdir(parents=True)
            self._open_log()
            log.info(
                "starting: data dir %s, %s:%d, master %s, conf %s",
                d.root,
                self.options.host,
                self.options.port,
                self.options.master,
                dict(self.options.conf),
            )
            log.info(
                "authentication: %s; allowed roots: %s; administrators: %s",
                self.options.auth.describe(),
                ", ".join(self.options.roots),
                ", ".join(self.options.admin_users) or "none",
            )
            started = time.monotonic()
            with _output_to(d.log_file):
                self.spark = self._session()
            self._check_stop()
            self._thrift = self._start_thrift_server(self.spark)
            self._await_listening()
            create_insight_views(self.spark)
            for service in self.services:
                self._check_stop()
                service.start(self.spark)
                self._started_services.append(service)
                log.info("service %s started", service.name)
            self._check_stop()
            log.info("ready in %.1f s: %s", time.monotonic() - started, self.options.jdbc_url)
        except _StopDuringStart:
            pass  # stopped below, outside the handler: no exception context in the log
        except UseError as e:
            log.error("start failed: %s", e)
            self.stop()
            raise
        except BaseException:
            log.exception("start failed")
            self.stop()
            raise
        else:
            return self.options.jdbc_url
        log.info("stop requested while starting")
        self.stop()
        return None

    def _lock(self) -> None:
        """Hold the data directory's lock file for the life of the process: two servers on one
        Derby metastore would fail later and less clearly. The kernel releases it on any exit."""
        path = self.options.data_dir.lock_file
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ServerError(
                f"--data-dir {self.options.data_dir.root} is in use by another `use serve` (pid {holder}); "
                "stop it or pass another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _open_log(self) -> None:
        """The data dir's log takes the lines of the server and its services (INFO and up) and
        every warning of any other logger of the process (py4j, pyspark, USE's SQL surface). It is
        the root logger's handler so that nothing falls back to a console handler: py4j's
        module-level `logging.info` calls `logging.basicConfig` when the root has none, which put
        the server's own lines on the console too (a second "stopped" after a stop)."""
        handler = logging.FileHandler(self.options.data_dir.log_file, mode="a", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
        for name in _LOGGERS:
            logging.getLogger(name).setLevel(logging.INFO)
        self._log_handler = handler

    def _session(self) -> SparkSession:
        """The server's SparkSession, built by `use.session.spark_session` so that everything USE
        sets up for its sessions applies here too, with the server's conf on top."""
        spark = spark_session("use-serve", master=self.options.master, conf=spark_conf(self.options))
        self.spark = spark  # stopped by stop() even if what follows fails or a stop interrupts it
        log.info("Spark session started; booting the metastore")
        # spark_session quiets Spark to ERROR for interactive use; a server's log keeps warnings.
        spark.sparkContext.setLogLevel(self.options.conf.get("spark.log.level", "WARN"))
        self._check_stop()
        # Boot the metastore now: a Derby database that cannot be opened is a start error, not
        # the first client's, and the first query does not pay for the boot.
        spark.catalog.listDatabases()
        return spark

    @staticmethod
    def _start_thrift_server(spark: SparkSession) -> Any:
        """Start Spark's Thrift server on the session, with the shim's `ThriftErrors` in front of
        it: a failed statement reaches clients as one message, where Spark's server sends the
        whole JVM stack trace (in the error message itself for beeline and the Hive JDBC driver)."""
        jvm = driver_jvm(spark)
        server = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(spark._jsparkSession.sqlContext())
        if shim_loaded(spark):
            jvm.use.shim.ThriftErrors.install(server)
        else:
            log.warning("the JVM shim is not loaded: JDBC clients get Spark's errors with their stack traces")
        return server

    def _await_listening(self) -> None:
        """Poll the port until it accepts a connection: `startWithContext` returns before the
        Thrift server's thread listens. The JVM ends itself if that bind fails, so a dead JVM is
        an error at once, not after the timeout."""
        host, port = self.options.connect_host, self.options.port
        deadline = time.monotonic() + _LISTEN_TIMEOUT_S
        while True:
            try:
                socket.create_connection((host, port), timeout=1.0).close()
                return
            except OSError:
                pass
            if not self._jvm_alive():
                raise ServerError(
                    f"the JVM ended before the Thrift server listened on {host}:{port}; see {self.options.data_dir.log_file}"
                )
            if time.monotonic() > deadline:
                raise ServerError(
                    f"the Thrift server did not listen on {host}:{port} within {_LISTEN_TIMEOUT_S:.0f} s; "
                    f"see {self.options.data_dir.log_file}"
                )
            self._check_stop()
            time.sleep(0.05)

    @staticmethod
    def _jvm_process() -> Any:
        gateway = SparkContext._gateway
        return getattr(gateway, "proc", None)

    def _jvm_alive(self) -> bool:
        proc = self._jvm_process()
        return proc is None or proc.poll() is None

    # --- run and stop ------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask `wait()` to return, or `start()` to stop at its next step (safe from signal
        handlers and other threads)."""
        self._stop_requested.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested.is_set()

    def _check_stop(self) -> None:
        if self._stop_requested.is_set():
            raise _StopDuringStart()

    def wait(self) -> None:
        """Block until a stop is requested or the JVM ends on its own."""
        while not self._stop_requested.wait(timeout=1.0):
            if not self._jvm_alive():
                raise ServerError(f"the JVM ended unexpectedly; see {self.options.data_dir.log_file}")

    def stop(self) -> None:
        """Stop whatever was started, newest first; idempotent. Every step runs even if an
        earlier one failed (each failure is logged), so the process always exits cleanly."""
        if self._stopped:
            return
        self._stopped = True
        log.info("stopping")
        for service in reversed(self._started_services):
            _logged(f"stopping service {service.name}", service.stop)
        if self._thrift is not None:
            _logged("stopping the Thrift server", self._thrift.stop)
        if self.spark is not None:
            _logged("stopping Spark", self.spark.stop)
            _logged("shutting down the Derby metastore", self._shutdown_derby)
            _logged("ending the JVM", self._end_jvm)
        if self._lock_fd is not None:  # the data dir is ours (not another server's that holds it)
            shutil.rmtree(self.options.data_dir.tmp, ignore_errors=True)
        log.info("stopped")
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler.close()
        if self._lock_fd is not None:
            # A clean stop leaves no lock file behind (removed while still held, so no other server
            # can take the old one meanwhile); a killed server's stale file is taken over by the next.
            self.options.data_dir.lock_file.unlink(missing_ok=True)
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _shutdown_derby(self) -> None:
        """Shut the embedded metastore database down, so the next start boots a clean database
        (no recovery, no stale lock files). Derby reports success as an SQLException."""
        if self.spark is None:  # Spark never started: no metastore was booted
            return
        jvm = driver_jvm(self.spark)
        url = f"jdbc:derby:;databaseName={self.options.data_dir.metastore};shutdown=true"
        try:
            jvm.java.sql.DriverManager.getConnection(url)
        except Py4JJavaError as e:
            if e.java_exception.getSQLState() not in _DERBY_SHUTDOWN_OK:
                raise

    def _end_jvm(self) -> None:
        """The JVM exits when its stdin closes; wait for it so nothing writes into the data dir
        after the server has returned."""
        proc = self._jvm_process()
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=_JVM_EXIT_TIMEOUT_S)


class _MetastoreService:
    """The optimization service over the server's tables: its source (the metastore and the
    warehouse directory) needs the server's SparkSession, which exists only at `start`. The
    metastore's catalog events (DDL over JDBC or PySpark) reach it at once; commits by other
    processes at its next listing, one interval at most."""

    name = "optimization"

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.service: Any = None
        self.events: Any = None

    def start(self, spark: SparkSession) -> None:
        d = self.options.data_dir
        source = CombinedSource(MetastoreSource(spark), LocationSource(directories=[d.warehouse]))
        self.service = OptimizationService(source, d.service)
        self.service.start(spark)
        self.events = MetastoreEvents(spark, self.service)
        if self.events.start():
            log.info("catalog events reach the optimization service at once")

    def stop(self) -> None:
        if self.events is not None:
            self.events.stop()
        if self.service is not None:
            self.service.stop()


def default_services(options: ServerOptions) -> list[Service]:
    """What a server runs beside the Thrift server: the continuous optimization service (its state
    in `<data dir>/service`, settings from the session's `spark.qbeast.use.*` conf), unless
    `--no-service`."""
    return [_MetastoreService(options)] if options.service else []


def _logged(what: str, step: Callable[[], object]) -> None:
    try:
        step()
    except Exception:
        log.exception("failed %s", what)


@contextmanager
def _output_to(path: os.PathLike[str]) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2) to `path` meanwhile: the
    JVM started inside inherits them, and with it every line Spark, Hive, Derby and the Python
    workers print goes to the log instead of the console."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (target, *saved):
            os.close(fd)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _print(line: str) -> None:
    print(line, flush=True)  # a pipe (tests, supervisors) must see the ready line at once


def _start_off_the_main_thread(server: UseServer) -> str | None:
    """`server.start()` on a thread of its own, the main thread waiting for it.

    Why: signals are handled on the main thread, and pyspark's SparkContext, when built on the main
    thread, replaces the SIGINT handler with its own, which raises KeyboardInterrupt into whatever
    py4j call the start is in (a Ctrl-C while the JVM booted ended in a Py4JError traceback and exit
    code 1). Built on another thread, it leaves `serve`'s handler in place, which only asks for the
    stop; `start` honours it at its next step and returns None."""
    outcome: list[str | None] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(server.start())
        except BaseException as e:  # noqa: BLE001 - re-raised on the main thread below
            failure.append(e)

    starter = threading.Thread(target=run, name="use-serve-start")
    starter.start()
    starter.join()  # a signal runs its handler meanwhile, and the join goes on
    if failure:
        raise failure[0]
    return outcome[0]


def serve(
    options: ServerOptions,
    services: Sequence[Service] | None = None,
    out: Callable[[str], None] = _print,
    after_ready: Callable[[ServerOptions, Callable[[str], None]], None] | None = None,
) -> int:
    """Run a server until SIGINT or SIGTERM; 0 after a clean stop. A second signal during the
    stop ends the process at once (exit 1). `after_ready` prints more once the server is ready
    (`use serve --demo`: how to query the demo table)."""
    server = UseServer(options, services)

    def on_signal(signum: int, _frame: object) -> None:
        if server.stop_requested:
            os._exit(1)
        log.info("received %s", signal.Signals(signum).name)
        server.request_stop()

    previous = {s: signal.signal(s, on_signal) for s in _STOP_SIGNALS}
    try:
        url = _start_off_the_main_thread(server)
        if url is not None and not server.stop_requested:
            d = options.data_dir
            out(f"{READY_PREFIX}{url}")
            out(f"use serve: data dir {d.root}, log {d.log_file}; stop with Ctrl-C (SIGINT) or SIGTERM")
            if after_ready is not None:
                after_ready(options, out)
            server.wait()
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    out("use serve: stopped")
    return 0
