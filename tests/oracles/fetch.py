"""Fetch the oracle engines' jars (and qbeast-spark's Python) once; afterwards, never the network.

`python tests/oracles/fetch.py [delta-spark] [qbeast-spark]` (what `make setup` runs) and the test
fixtures call the same functions. Each engine's jars are copied by Maven from `pom.xml` (one profile
per engine, strict checksums: a jar whose digest does not match the registry's is refused) into a
temporary directory, checked against the SHA-256 pins of `jars.sha256`, and only then renamed into
`build/oracles/<engine>/`. A directory whose jars all match their pins is used as it is, without
Maven: a second run needs no network.

qbeast-spark is not served by every registry. When Maven reports that `io.qbeast` artifacts cannot be
resolved, the refusal is remembered (`build/oracles/qbeast-spark.refused`, tied to pom.xml's digest:
Maven is not asked again until the pom changes or the file is removed) and a jar named by
`USE_QBEAST_SPARK_JARS` (paths separated by `:`; e.g. one built from qbeast-spark's source) is used
with the same release's runtime (delta-spark 3.1.0) from the registry; without it the engine is
unavailable and its tests skip, saying why.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / "build" / "oracles"
POM = HERE / "pom.xml"
LOCK = HERE / "jars.sha256"
QBEAST_JARS_ENV = "USE_QBEAST_SPARK_JARS"
QBEAST_RELEASE = "io.qbeast:qbeast-spark_2.12:0.7.1"
# qbeast-spark 0.7.1 is built for Spark 3.5 (Scala 2.12) and delta-spark 3.1.0; its Python process
# runs on this interpreter's version with these pins, in a virtualenv of its own.
PYSPARK35_PINS = ("pyspark==3.5.2", "pyarrow==22.0.0", "numpy==1.26.4")
PYSPARK35_VENV = CACHE / "venv-pyspark3.5"


class OracleUnavailable(Exception):
    """The engine cannot run here; the message says why and what would make it run."""


def _pins() -> dict[str, dict[str, str]]:
    """{engine directory: {jar name: sha256}} from jars.sha256."""
    pins: dict[str, dict[str, str]] = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, rel = line.split()
            directory, name = rel.split("/")
            pins.setdefault(directory, {})[name] = digest
    return pins


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_pins(directory: Path, engine: str) -> list[Path]:
    """The jars of `directory`, each matching its pin; ValueError naming the first that does not."""
    pins = _pins().get(engine, {})
    jars = sorted(directory.glob("*.jar"))
    for jar in jars:
        want = pins.get(jar.name)
        if want is None:
            raise ValueError(f"{jar.name} is not pinned in {LOCK}: add `{_sha256(jar)}  {engine}/{jar.name}` after checking it")
        if _sha256(jar) != want:
            raise ValueError(f"{jar} does not match its SHA-256 pin in {LOCK}")
    missing = sorted(set(pins) - {j.name for j in jars})
    if missing:
        raise ValueError(f"{directory} lacks {', '.join(missing)}")
    return jars


def _pom_digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()[:16]


def _mvn(profile: str, out: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("mvn") is None:
        raise OracleUnavailable(
            "Maven is not installed (`apt-get install -y maven`): the oracle engines' jars are fetched with mvn"
        )
    cmd = ["mvn", "-B", "-q", "-C", "-f", str(POM), "-P", profile, "dependency:copy-dependencies", f"-DoutputDirectory={out}"]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _fetch(engine: str, profile: str) -> list[Path]:
    """Copy a profile's jars into build/oracles/<engine>/ (pinned, atomic); their paths."""
    target = CACHE / engine
    try:
        return _check_pins(target, engine)
    except ValueError:
        pass  # absent or incomplete: fetch
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{engine}-", dir=CACHE))
    try:
        done = _mvn(profile, tmp)
        if done.returncode != 0:
            raise OracleUnavailable(f"mvn could not fetch the {engine} jars (profile {profile}):\n{_mvn_errors(done)}")
        _check_pins(tmp, engine)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _check_pins(target, engine)


def _mvn_errors(done: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "ERROR" in ln and ln.strip() != "[ERROR]"]
    return "\n".join(lines[:3]) or (done.stdout + done.stderr)[-2000:]


def delta_spark_jars() -> list[Path]:
    """delta-spark for the project's Spark (pyspark 4.1.1, Scala 2.13)."""
    return _fetch("delta-spark", "delta-spark")


def qbeast_spark_jars() -> list[Path]:
    """qbeast-spark 0.7.1 with delta-spark 3.1.0 (Spark 3.5, Scala 2.12): from the registry, or the
    jars of USE_QBEAST_SPARK_JARS where the registry refuses io.qbeast artifacts."""
    refused = CACHE / "qbeast-spark.refused"
    if not (refused.is_file() and refused.read_text().startswith(_pom_digest())):
        try:
            return _fetch("qbeast-spark", "qbeast-spark")
        except OracleUnavailable as e:
            if "io.qbeast" not in str(e):
                raise
            CACHE.mkdir(parents=True, exist_ok=True)
            refused.write_text(f"{_pom_digest()}\n{e}\n")
    said = refused.read_text().split("\n", 1)[1]
    found = re.search(r"io\.qbeast:\S+ (?:was not found in|could not be resolved from) \S+", said)
    reason = found.group(0) if found else said.strip().splitlines()[-1]
    given = [Path(p) for p in os.environ.get(QBEAST_JARS_ENV, "").split(os.pathsep) if p]
    if not given:
        raise OracleUnavailable(
            f"the registry refused io.qbeast artifacts ({QBEAST_RELEASE}: mvn says {reason}); "
            f"set {QBEAST_JARS_ENV} to qbeast-spark 0.7.1 jar(s) built from its source to run these tests"
        )
    absent = [str(p) for p in given if not p.is_file()]
    if absent:
        raise OracleUnavailable(f"{QBEAST_JARS_ENV} names jars that do not exist: {', '.join(absent)}")
    return given + _fetch("qbeast-spark", "qbeast-spark-runtime")


def pyspark35_python() -> Path:
    """The Python of qbeast-spark's virtualenv (pyspark 3.5), created with its pins when missing."""
    python = PYSPARK35_VENV / "bin" / "python"
    stamp = PYSPARK35_VENV / ".installed"
    pins = "\n".join(PYSPARK35_PINS)
    if stamp.is_file() and stamp.read_text() == pins and python.is_file():
        return python
    shutil.rmtree(PYSPARK35_VENV, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(PYSPARK35_VENV)], check=True)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", *PYSPARK35_PINS], capture_output=True, text=True)
    if done.returncode != 0:
        raise OracleUnavailable(f"could not install {' '.join(PYSPARK35_PINS)} into {PYSPARK35_VENV}:\n{done.stderr[-2000:]}")
    stamp.write_text(pins)
    return python


def main(argv: list[str]) -> int:
    engines = argv or ["delta-spark", "qbeast-spark"]
    for engine in engines:
        if engine == "delta-spark":
            jars = delta_spark_jars()
            print(f"delta-spark: {len(jars)} jars in {jars[0].parent}")
        elif engine == "qbeast-spark":
            try:
                jars = qbeast_spark_jars()
                python = pyspark35_python()
            except OracleUnavailable as e:  # optional: its tests skip and say why
                print(f"qbeast-spark: unavailable, its tests will skip: {e}")
                continue
            print(f"qbeast-spark: {', '.join(str(j) for j in jars)}; pyspark 3.5 in {python.parent.parent}")
        else:
            print(f"unknown engine {engine!r}: delta-spark or qbeast-spark", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OracleUnavailable as e:
        print(f"oracles: {e}", file=sys.stderr)
        sys.exit(1)
