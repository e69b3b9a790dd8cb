"""A real `use serve` subprocess for tests, and JDBC clients to talk to it.

The server is started as a user would start it (the `use` command line), in an environment where
only runtime dependencies import (`runtime_env`), from a directory of its own so stray files in
the working directory can be seen. Readiness is awaited from its output (the line starting with
`use.server.READY_PREFIX`), never by sleeping; everything it printed and its log are kept for the
failure report.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from runtime_env import runtime_only_env
from use.server import READY_PREFIX

# A server start took 8 s alone and 30 s on a busy 2-core machine; the margin is for worse.
START_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 120.0
_CLI = "import sys; from use.cli import main; sys.exit(main())"


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A `use serve` subprocess on a data dir; `stop()` then `start()` restarts it on the same data
    dir (on a new free port: the old one may linger in TIME_WAIT)."""

    def __init__(self, data_dir: Path, workdir: Path, port: int | None = None, args: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.workdir = workdir
        self.port = port or free_port()
        self.args = args
        self.url: str | None = None
        self.proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def command(self) -> list[str]:
        return [
            sys.executable, "-c", _CLI, "serve",
            "--data-dir", str(self.data_dir), "--port", str(self.port), "--master", "local[2]",
            "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.driver.memory=1g",
            *self.args,
        ]  # fmt: skip

    def start(self) -> str:
        """Start the server and return its JDBC URL once it accepts connections; `RuntimeError`
        with its output and log if it exits or does not get ready in time."""
        if self.proc is not None:  # a restart
            self.port, self.url, self._ready = free_port(), None, threading.Event()
            self._lines.append(f"--- restarted on port {self.port} ---\n")
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = runtime_only_env(self.workdir.parent / "site")
        self.proc = subprocess.Popen(
            self.command(), cwd=self.workdir, env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, name=f"use-serve-{self.port}-output", daemon=True)
        self._reader.start()
        if not self._ready.wait(START_TIMEOUT_S) or self.url is None:
            self.kill()
            raise RuntimeError(f"use serve did not get ready (exit {self.proc.poll()}):\n{self.report()}")
        return self.url

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        stdout, ready = self.proc.stdout, self._ready
        for line in stdout:
            self._lines.append(line)
            if line.startswith(READY_PREFIX):
                self.url = line[len(READY_PREFIX) :].strip()
                ready.set()
        ready.set()  # exited: wake start() up

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig` and wait for the exit; the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(STOP_TIMEOUT_S)
        if self._reader is not None:
            self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def log(self) -> str:
        path = self.data_dir / "logs" / "server.log"
        return path.read_text(errors="replace") if path.exists() else "(no log)"

    def report(self, log_tail: int = 200) -> str:
        """Its output and the end of its log, for a failure message."""
        tail = "\n".join(self.log().splitlines()[-log_tail:])
        return f"--- use serve output ---\n{self.output}\n--- {self.data_dir}/logs/server.log (tail) ---\n{tail}"

    def connect(self):
        """A new PyHive connection (one JDBC session)."""
        from pyhive import hive

        return hive.connect(host=self.host, port=self.port, username=os.environ.get("USER", "use-tests"))

    def sql(self, *statements: str) -> list[tuple] | None:
        """Run statements in one new JDBC session; the last one's rows (None for a statement
        without rows)."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            rows = None
            for statement in statements:
                cur.execute(statement)
                rows = cur.fetchall() if cur.description else None
            return rows
        finally:
            conn.close()
