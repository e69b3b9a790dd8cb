"""What `use serve` runs with: its options, checked before any JVM starts, the layout of its data
directory, and the Spark conf they become.

Everything a bad flag can be is caught here, in milliseconds and with a one-line error, instead of
half a minute later as a JVM stack trace: a malformed or ignored `--conf`, a key that a flag owns, an
unknown `spark.qbeast.use.*` key or a bad value (through the one typed config parser), a port out of range or taken,
a host that is not this machine's, a data directory that cannot be written or that another server
holds. The layout of the data directory is decided in one place (`DataDir`) so the server, its
tests and its documentation (docs/server.md) cannot drift apart.
"""

from __future__ import annotations

import errno
import os
import shlex
import socket
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from use.errors import ConfigError, ServerError
from use.optimize.keys import SPARK_CONF, SPARK_PREFIX

__all__ = [
    "DEFAULT_DATA_DIR",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "READY_PREFIX",
    "DataDir",
    "ServerOptions",
    "check_data_dir",
    "check_port_free",
    "parse_conf_pairs",
    "spark_conf",
]

DEFAULT_DATA_DIR = "use-data"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10000
DEFAULT_MASTER = "local[*]"
# The line `use serve` prints once the Thrift server accepts connections; scripts and tests wait for
# it (the JDBC URL follows it on the same line).
READY_PREFIX = "use serve: accepting JDBC connections at "

THRIFT_PORT_KEY = "spark.hadoop.hive.server2.thrift.port"
THRIFT_HOST_KEY = "spark.hadoop.hive.server2.thrift.bind.host"
METASTORE_URL_KEY = "spark.hadoop.javax.jdo.option.ConnectionURL"
DRIVER_JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"

# Keys a flag (or the server itself) decides; a `--conf` for them would be silently overridden or
# would break the server, so it is refused with the flag to use instead.
_OWNED_KEYS: Mapping[str, str] = {
    "spark.master": "use --master",
    THRIFT_PORT_KEY: "use --port",
    THRIFT_HOST_KEY: "use --host",
    METASTORE_URL_KEY: "use --data-dir (the metastore lives in DATA_DIR/metastore_db)",
    "spark.sql.warehouse.dir": "use --data-dir (managed tables live in DATA_DIR/warehouse)",
    "spark.sql.catalogImplementation": "the server always runs with the Hive metastore",
}
_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True)
class DataDir:
    """Where a server keeps everything: the metastore, managed tables, logs and scratch space.

    Only `tmp/` is throw-away (emptied at every start and stop); the rest is the server's state,
    and a server restarted on the same directory finds every table there."""

    root: Path

    @property
    def metastore(self) -> Path:
        """The embedded Derby database holding the Hive metastore (table registrations)."""
        return self.root / "metastore_db"

    @property
    def warehouse(self) -> Path:
        """`spark.sql.warehouse.dir`: managed tables."""
        return self.root / "warehouse"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def log_file(self) -> Path:
        """The server's log: its own lines and everything the JVM and Python workers print."""
        return self.logs / "server.log"

    @property
    def derby_log(self) -> Path:
        return self.logs / "derby.log"

    @property
    def service(self) -> Path:
        """The continuous optimization service's state (its schedules, restored after a restart)."""
        return self.root / "service"

    @property
    def tmp(self) -> Path:
        """The JVM's `java.io.tmpdir`, Spark's local dirs and Hive's scratch dirs."""
        return self.root / "tmp"

    @property
    def lock_file(self) -> Path:
        """Held (flock) by the one server using this directory."""
        return self.root / "serve.lock"


@dataclass(frozen=True)
class ServerOptions:
    """The options of one `use serve` process, validated (see `from_flags`)."""

    data_dir: DataDir
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    master: str = DEFAULT_MASTER
    conf: Mapping[str, str] = field(default_factory=dict)
    #: Run the continuous optimization service (`use serve --no-service` turns it off).
    service: bool = True

    @classmethod
    def from_flags(
        cls,
        data_dir: str | os.PathLike[str] = DEFAULT_DATA_DIR,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        master: str = DEFAULT_MASTER,
        conf_pairs: Sequence[str] = (),
        service: bool = True,
    ) -> ServerOptions:
        """Options from the command line's values; `ConfigError` for a value that can never work
        (checks that depend on the machine's state are `check_data_dir` / `check_port_free`)."""
        if not 1 <= port <= 65535:
            raise ConfigError(f"--port {port} is not a TCP port; pass a number between 1 and 65535")
        if not master.strip():
            raise ConfigError("--master is empty; pass a Spark master URL such as local[*]")
        conf = parse_conf_pairs(conf_pairs)
        return cls(DataDir(Path(data_dir).expanduser().absolute()), host.strip(), port, master.strip(), conf, service)

    @property
    def connect_host(self) -> str:
        """The host clients (and the readiness probe) connect to: the bind host, or loopback when
        the server listens on every interface."""
        return "127.0.0.1" if self.host in _WILDCARD_HOSTS else self.host

    @property
    def jdbc_url(self) -> str:
        host = f"[{self.connect_host}]" if ":" in self.connect_host else self.connect_host
        return f"jdbc:hive2://{host}:{self.port}/default"


def parse_conf_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` strings of `--conf` as a mapping (a later key wins, as with spark-submit).

    Refused: a pair without `=`, an empty key, a key Spark would ignore (not `spark.*`), a key a
    flag owns, and an unknown `spark.qbeast.use.*` key or a bad value (checked by the optimization
    config parser)."""
    # deferred: the config parser imports pyarrow; `use --help` imports this module for the defaults
    from use.optimize.config import ServiceConfig

    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--conf {pair!r} is not KEY=VALUE; write it as --conf spark.some.key=value")
        if not key.startswith("spark."):
            raise ConfigError(f"--conf {key}: Spark ignores keys that do not start with 'spark.'; check the key's name")
        if key in _OWNED_KEYS:
            raise ConfigError(f"--conf {key} cannot be set: {_OWNED_KEYS[key]}")
        conf[key] = value
    ServiceConfig.from_spark_conf({k: v for k, v in conf.items() if k.startswith(SPARK_PREFIX)})
    return conf


def spark_conf(options: ServerOptions) -> dict[str, str]:
    """The Spark conf the server's session is built with: the caller's `--conf` plus what the
    server decides (Hive metastore in Derby under the data dir, warehouse, Thrift port and host,
    scratch space, Derby's log), on top of the service's needs (`use.optimize.keys.SPARK_CONF`:
    the FAIR scheduler, so JDBC queries are not queued behind a merge; a `--conf` may override it).
    These are set at session build because Spark reads them only
    then: with Hive support a runtime `spark.conf.set` of the Thrift port was ignored.

    No `derby.system.home`: it made every JDBC session close retry for about 20 s."""
    d = options.data_dir
    java_options = [
        f"-Dderby.stream.error.file={d.derby_log}",
        f"-Djava.io.tmpdir={d.tmp}",
    ]
    user_java_options = options.conf.get(DRIVER_JAVA_OPTIONS_KEY, "").strip()
    return {
        **SPARK_CONF,
        **options.conf,
        "spark.sql.catalogImplementation": "hive",
        METASTORE_URL_KEY: f"jdbc:derby:;databaseName={d.metastore};create=true",
        "spark.sql.warehouse.dir": str(d.warehouse),
        # Spark's local dirs and Hive's local scratch dirs follow java.io.tmpdir (below); Hive's
        # "HDFS" scratch dir would be /tmp/hive.
        "spark.hadoop.hive.exec.scratchdir": str(d.tmp / "hive"),
        THRIFT_PORT_KEY: str(options.port),
        THRIFT_HOST_KEY: options.host,
        # Spark splits this string like a shell would: quote what has spaces.
        DRIVER_JAVA_OPTIONS_KEY: " ".join([*(shlex.quote(o) for o in java_options), user_java_options]).strip(),
    }


def check_data_dir(data_dir: DataDir) -> None:
    """Create the data directory and its folders; `ServerError` if it cannot be written."""
    try:
        for folder in (data_dir.root, data_dir.warehouse, data_dir.logs):
            folder.mkdir(parents=True, exist_ok=True)
        # os.access is not enough (read-only mounts, ACLs): write a file.
        with tempfile.NamedTemporaryFile(dir=data_dir.root, prefix=".write-check-"):
            pass
    except OSError as e:
        reason = e.strerror or str(e)
        raise ServerError(f"--data-dir {data_dir.root} cannot be written ({reason}); pass a directory you can write to") from None


def check_port_free(host: str, port: int) -> None:
    """`ServerError` if nothing can listen on `host:port`: the port is taken, or the host is not
    an address of this machine. Checked before the JVM starts because the Thrift server ends the
    whole JVM when its bind fails."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ServerError(f"--host {host!r} cannot be resolved ({e.strerror}); pass an address of this machine") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As a server socket binds: a port held only by connections in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise ServerError(
                    f"port {port} on {host} is already in use (another server?); stop it or pass another --port"
                ) from None
            if e.errno == errno.EADDRNOTAVAIL:
                raise ServerError(f"--host {host} is not an address of this machine; pass one of its addresses") from None
            raise ServerError(f"cannot listen on {host}:{port} ({e.strerror}); pass another --host or --port") from None
