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
import getpass
import ipaddress
import os
import shlex
import socket
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from use.errors import ConfigError, ServerError
from use.optimize.keys import ADMINS_KEY, ALLOWED_ROOTS_KEY, SESSION_USER_KEY, SPARK_CONF, SPARK_PREFIX
from use.server.passwords import check_user_name, read_entries

__all__ = [
    "AUTH_MODES",
    "DEFAULT_DATA_DIR",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "READY_PREFIX",
    "AuthOptions",
    "DataDir",
    "ServerOptions",
    "check_data_dir",
    "check_exposure",
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
HIVE_AUTH_KEY = "hive.server2.authentication"
HIVE_CUSTOM_AUTH_CLASS_KEY = "hive.server2.custom.authentication.class"
HIVE_LDAP_URL_KEY = "hive.server2.authentication.ldap.url"
HIVE_LDAP_BASE_DN_KEY = "hive.server2.authentication.ldap.baseDN"
#: The shim's Hive CUSTOM authentication provider for `--auth password`, and the JVM system property
#: naming its password file (`use.shim.PasswordFileAuthenticator`).
PASSWORD_AUTHENTICATOR = "use.shim.PasswordFileAuthenticator"
PASSWORD_FILE_PROPERTY = "use.auth.passwordFile"
#: `--auth`: none (anyone who reaches the port), password (`use passwd`'s file), ldap (a simple bind).
AUTH_MODES = ("none", "password", "ldap")

# Keys a flag (or the server itself) decides; a `--conf` for them would be silently overridden or
# would break the server, so it is refused with the flag to use instead.
_OWNED_KEYS: Mapping[str, str] = {
    "spark.master": "use --master",
    THRIFT_PORT_KEY: "use --port",
    THRIFT_HOST_KEY: "use --host",
    METASTORE_URL_KEY: "use --data-dir (the metastore lives in DATA_DIR/metastore_db)",
    "spark.sql.warehouse.dir": "use --data-dir (managed tables live in DATA_DIR/warehouse)",
    "spark.sql.catalogImplementation": "the server always runs with the Hive metastore",
    ALLOWED_ROOTS_KEY: "use --allowed-root DIR (the data dir and its warehouse are always allowed)",
    ADMINS_KEY: "use --admin USER",
    SESSION_USER_KEY: "the server sets it for each JDBC session",
    **{f"spark.hadoop.{k}": "use --auth and its flags" for k in (HIVE_AUTH_KEY, HIVE_CUSTOM_AUTH_CLASS_KEY, HIVE_LDAP_URL_KEY)},
    f"spark.hadoop.{HIVE_LDAP_BASE_DN_KEY}": "use --auth ldap --ldap-base-dn",
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
class AuthOptions:
    """Who may connect: `mode` one of `AUTH_MODES`, None when `--auth` was not given (no
    authentication, allowed on loopback only)."""

    mode: str | None = None
    password_file: Path | None = None
    ldap_url: str | None = None
    ldap_base_dn: str | None = None

    @classmethod
    def from_flags(
        cls, mode: str | None, password_file: str | None = None, ldap_url: str | None = None, ldap_base_dn: str | None = None
    ) -> AuthOptions:
        """Checked flags; `ConfigError` for a combination that cannot work (the host is checked
        against them by `check_exposure`)."""
        if mode is not None and mode not in AUTH_MODES:
            raise ConfigError(f"--auth {mode!r} is not one of {', '.join(AUTH_MODES)}")
        if password_file is not None and mode != "password":
            raise ConfigError("--password-file is for --auth password; add --auth password or leave it out")
        if (ldap_url is not None or ldap_base_dn is not None) and mode != "ldap":
            raise ConfigError("--ldap-url and --ldap-base-dn are for --auth ldap; add --auth ldap or leave them out")
        if mode == "password":
            if password_file is None:
                raise ConfigError("--auth password needs --password-file FILE; create it with `use passwd --file FILE add USER`")
            path = Path(password_file).expanduser().absolute()
            if not read_entries(path):
                raise ConfigError(f"password file {path} has no users; add one with `use passwd --file {path} add USER`")
            return cls(mode, password_file=path)
        if mode == "ldap":
            if not ldap_url or not ldap_url.startswith(("ldap://", "ldaps://")):
                raise ConfigError("--auth ldap needs --ldap-url ldap://HOST:PORT (or ldaps://...)")
            if not ldap_base_dn:
                raise ConfigError(
                    "--auth ldap needs --ldap-base-dn, e.g. ou=people,dc=example,dc=org (users bind as uid=USER,BASE)"
                )
            return cls(mode, ldap_url=ldap_url, ldap_base_dn=ldap_base_dn)
        return cls(mode)

    @property
    def authenticates(self) -> bool:
        return self.mode in ("password", "ldap")

    def hive_conf(self) -> dict[str, str]:
        """The Hive settings of the Thrift server's authentication (none: Hive's default NONE, any user name)."""
        if self.mode == "password":
            return {HIVE_AUTH_KEY: "CUSTOM", HIVE_CUSTOM_AUTH_CLASS_KEY: PASSWORD_AUTHENTICATOR}
        if self.mode == "ldap":
            return {HIVE_AUTH_KEY: "LDAP", HIVE_LDAP_URL_KEY: str(self.ldap_url), HIVE_LDAP_BASE_DN_KEY: str(self.ldap_base_dn)}
        return {}

    def describe(self) -> str:
        """For the log: the mode and where users are checked (never a password or a hash)."""
        if self.mode == "password":
            return f"password (file {self.password_file})"
        if self.mode == "ldap":
            return f"ldap ({self.ldap_url}, uid=USER,{self.ldap_base_dn})"
        return "none"


def check_exposure(options: ServerOptions) -> None:
    """`ConfigError` if the server would listen beyond this machine with no `--auth` given: anyone
    who reaches the port would run SQL as the server. An explicit `--auth none` is allowed (the
    command line warns)."""
    if options.auth.mode is None and not is_loopback(options.host):
        raise ConfigError(
            f"--host {options.host or '(every interface)'} lets other machines connect, and without authentication "
            "anyone who reaches the port runs SQL as this server: pass --auth password (with --password-file) or "
            "--auth ldap, or --auth none to run without authentication anyway"
        )


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach `host` (a loopback address or `localhost`)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    auth: AuthOptions = field(default_factory=AuthOptions)
    #: `--admin`: the users who may run administrators' operations (VACUUM with force).
    admins: tuple[str, ...] = ()
    #: `--allowed-root`: directories statements may use besides the data dir (absolute).
    allowed_roots: tuple[str, ...] = ()

    @classmethod
    def from_flags(
        cls,
        data_dir: str | os.PathLike[str] = DEFAULT_DATA_DIR,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        master: str = DEFAULT_MASTER,
        conf_pairs: Sequence[str] = (),
        service: bool = True,
        auth: AuthOptions | None = None,
        admins: Sequence[str] = (),
        allowed_roots: Sequence[str] = (),
    ) -> ServerOptions:
        """Options from the command line's values; `ConfigError` for a value that can never work
        (checks that depend on the machine's state are `check_data_dir` / `check_port_free`)."""
        if not 1 <= port <= 65535:
            raise ConfigError(f"--port {port} is not a TCP port; pass a number between 1 and 65535")
        if not master.strip():
            raise ConfigError("--master is empty; pass a Spark master URL such as local[*]")
        conf = parse_conf_pairs(conf_pairs)
        auth = auth if auth is not None else AuthOptions()
        names = tuple(check_user_name(a.strip()) for admin in admins for a in admin.split(",") if a.strip())
        roots = tuple(str(Path(r).expanduser().absolute()) if "://" not in r else r for r in allowed_roots)
        if any("," in r for r in roots):
            raise ConfigError(f"--allowed-root {next(r for r in roots if ',' in r)!r} has a comma; pass a directory without one")
        data = DataDir(Path(data_dir).expanduser().absolute())
        return cls(data, host.strip(), port, master.strip(), conf, service, auth, names, roots)

    @property
    def admin_users(self) -> tuple[str, ...]:
        """`--admin`, else the process owner when nobody authenticates (the server is theirs)."""
        if self.admins or self.auth.authenticates:
            return self.admins
        return (getpass.getuser(),)

    @property
    def roots(self) -> tuple[str, ...]:
        """`spark.qbeast.use.allowedRoots`: the data dir, its warehouse, and `--allowed-root`."""
        return (str(self.data_dir.root), str(self.data_dir.warehouse), *self.allowed_roots)

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
    hive_auth = options.auth.hive_conf()
    java_options = [
        f"-Dderby.stream.error.file={d.derby_log}",
        f"-Djava.io.tmpdir={d.tmp}",
        # Hive's authentication providers read their settings from a HiveConf of their own, which
        # takes JVM system properties (not the session's spark.hadoop.* conf).
        *(f"-D{k}={v}" for k, v in hive_auth.items()),
    ]
    if options.auth.password_file is not None:
        java_options.append(f"-D{PASSWORD_FILE_PROPERTY}={options.auth.password_file}")
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
        **{f"spark.hadoop.{k}": v for k, v in hive_auth.items()},
        # confined file access (use.server.access; the shim's UseAccess enforces it)
        ALLOWED_ROOTS_KEY: ",".join(options.roots),
        ADMINS_KEY: ",".join(options.admin_users),
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
