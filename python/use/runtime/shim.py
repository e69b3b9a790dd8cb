"""The JVM shim's jar: the Scala sources under `jvm-shim/`, compiled into a jar the Spark session loads.

There is no sbt and no Maven here, but pyspark's wheel carries the Scala compiler and every jar the
shim compiles against, so the jar is built from source on first use (about 5 s) and cached under
`build/jvm-shim/` by the Spark version and a digest of the sources: a changed source or another
pyspark builds a new jar, nothing stale is ever loaded (a new build removes the older ones of its
Spark version only: another venv's JVM may be running on its own). `use.session.spark_session` puts the jar on
the driver and executor class paths; code that needs a shim class asks `shim_loaded(spark)` and
keeps a Python path for sessions started without it. `python -m use.shim` (`use.shim`) prints the
jar's path or the flags that load it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark
from py4j.protocol import Py4JJavaError

from use.errors import ShimBuildError
from use.runtime.jvm import driver_jvm

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SOURCE_DIR", "build_shim", "shim_jar", "shim_loaded"]

_PROJECT_ROOT = Path(__file__).resolve().parents[3]
SOURCE_DIR = _PROJECT_ROOT / "jvm-shim" / "src" / "main" / "scala"
_BUILD_DIR = _PROJECT_ROOT / "build" / "jvm-shim"
# A class every version of the shim has; its presence means the session loaded the jar.
_PROBE_CLASS = "use.shim.OTreeFileWriter"


def _sources() -> list[Path]:
    return sorted(SOURCE_DIR.rglob("*.scala")) if SOURCE_DIR.is_dir() else []


def _spark_jars() -> Path:
    return Path(pyspark.__file__).resolve().parent / "jars"


def _jar_path(sources: list[Path]) -> Path:
    digest = hashlib.sha256(pyspark.__version__.encode())
    for src in sources:
        digest.update(str(src.relative_to(SOURCE_DIR)).encode() + b"\0" + src.read_bytes())
    return _BUILD_DIR / f"use-jvm-shim-spark{pyspark.__version__}-{digest.hexdigest()[:16]}.jar"


def _prune_old_jars(jar: Path) -> None:
    """Remove the jars this one replaces: older builds for the same Spark version (and unversioned
    ones of earlier releases). Jars built for another Spark version stay: another environment on
    the same source tree (a second venv) may be running a JVM on one, and a JVM reads class bytes
    from its jar long after start (Spark's closure cleaner does, on a job's first run), so deleting
    it broke their later jobs ("capturingClassReader is null")."""
    version_prefix = jar.name.rsplit("-", 1)[0] + "-"
    for old in jar.parent.glob("use-jvm-shim-*.jar"):
        if old != jar and (old.name.startswith(version_prefix) or not old.name.startswith("use-jvm-shim-spark")):
            old.unlink(missing_ok=True)


def build_shim() -> Path:
    """Compile the shim if its jar for these sources is not built yet; the jar's path.

    Raises `ShimBuildError` with the compiler's output when the sources do not compile, or when
    they are not there (an installation without the project's `jvm-shim/` directory)."""
    sources = _sources()
    if not sources:
        raise ShimBuildError(f"no Scala sources under {SOURCE_DIR}; install USE from its source tree to build the JVM shim")
    jar = _jar_path(sources)
    if jar.is_file():
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    # Compiled into a temporary jar and renamed, so concurrent builders never load a partial jar.
    fd, tmp = tempfile.mkstemp(prefix=".building-", suffix=".jar", dir=jar.parent)
    os.close(fd)
    cmd = [
        "java",
        "-cp",
        str(_spark_jars() / "*"),
        "scala.tools.nsc.Main",
        "-usejavacp",
        "-nowarn",
        "-d",
        tmp,
        *[str(s) for s in sources],
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ShimBuildError(
                f"the JVM shim did not compile (exit {done.returncode}); fix the sources under {SOURCE_DIR}:\n"
                f"{(done.stdout + done.stderr).strip()}"
            )
        os.replace(tmp, jar)
    except FileNotFoundError as e:
        raise ShimBuildError("the JVM shim needs `java` (Java 17) on the PATH to compile") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _prune_old_jars(jar)
    return jar


def shim_jar() -> Path | None:
    """The shim's jar, built if needed; `None` (with a warning) when it cannot be built, so a
    session still starts and USE takes its Python paths."""
    try:
        return build_shim()
    except ShimBuildError as e:
        print(f"use: running without the JVM shim: {e}", file=sys.stderr)
        return None


def shim_loaded(spark: SparkSession, probe: str = _PROBE_CLASS) -> bool:
    """Whether this session's driver can see the shim's classes (a session started by
    `use.session.spark_session` can; one built elsewhere may not); `probe` names the class to look
    for."""
    jvm = driver_jvm(spark)
    try:
        jvm.java.lang.Class.forName(probe, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Py4JJavaError:  # ClassNotFoundException: a session started without the jar
        return False
    return True
